import { GpuEvidenceError } from './errors.ts';
import { firmwareInfo, readOpaqueFields, type GpuFirmwareInfo, type OpaqueField } from './opaque-data.ts';

/** SPDM 1.1 (DMTF DSP0274): the only version NVIDIA Hopper GPUs answer with, and the only one read here. */
export const SPDM_VERSION_1_1 = 0x11;
export const SPDM_GET_MEASUREMENTS = 0xe0;
export const SPDM_MEASUREMENTS = 0x60;
export const SPDM_NONCE_BYTES = 32;
/** GET_MEASUREMENTS with a signature requested: 4 header bytes, the requester's nonce, the slot id. */
export const SPDM_SIGNED_REQUEST_BYTES = 4 + SPDM_NONCE_BYTES + 1;
/** ECDSA P-384 r || s, the GPU's signing algorithm. */
export const SPDM_P384_SIGNATURE_BYTES = 96;
/** Bit 0 of GET_MEASUREMENTS param1: the responder must sign its answer. */
const SIGNATURE_REQUESTED = 0x01;
/** Bit 0 of a measurement block's specification byte: the value is a DMTF measurement. */
const DMTF_MEASUREMENT_SPEC = 0x01;

export interface SpdmMeasurementBlock {
  /** SPDM measurement index (1-based); NVIDIA's RIMs number the same value index - 1. */
  index: number;
  /** DMTF value type (bits 0-6) and whether it is a raw bit stream (bit 7). */
  valueType: number;
  value: Uint8Array;
}

export interface SpdmMeasurementReport {
  request: { version: number; param1: number; param2: number; nonce: Uint8Array; slotId: number };
  response: { version: number; param1: number; param2: number; nonce: Uint8Array };
  blocks: SpdmMeasurementBlock[];
  opaque: OpaqueField[];
  firmware: GpuFirmwareInfo;
  /** The request and the response up to the signature: what the GPU signed (SHA-384, ECDSA P-384). */
  signedBytes: Uint8Array;
  /** r || s, 48 bytes each, big-endian. */
  signature: Uint8Array;
  /** Zero bytes after the signature (some NVML builds add one); unsigned, so they carry nothing and are ignored. */
  trailingZeroBytes: number;
}

class Cursor {
  offset = 0;
  constructor(
    private readonly bytes: Uint8Array,
    private readonly what: string,
  ) {}

  take(length: number, field: string): Uint8Array {
    if (this.offset + length > this.bytes.length) {
      throw new GpuEvidenceError('ERR_SPDM_TRUNCATED', `${this.what} ends inside ${field}: need ${this.offset + length} bytes, have ${this.bytes.length}`);
    }
    const out = this.bytes.subarray(this.offset, this.offset + length);
    this.offset += length;
    return out;
  }

  u8(field: string): number {
    return this.take(1, field)[0]!;
  }

  u16(field: string): number {
    const b = this.take(2, field);
    return b[0]! | (b[1]! << 8);
  }

  u24(field: string): number {
    const b = this.take(3, field);
    return b[0]! | (b[1]! << 8) | (b[2]! << 16);
  }
}

function readBlocks(record: Uint8Array, count: number): SpdmMeasurementBlock[] {
  const cursor = new Cursor(record, 'the measurement record');
  const blocks: SpdmMeasurementBlock[] = [];
  while (cursor.offset < record.length) {
    const index = cursor.u8('a block index');
    const spec = cursor.u8('a block specification');
    const size = cursor.u16('a block size');
    const body = new Cursor(cursor.take(size, `measurement block ${index}`), `measurement block ${index}`);
    if ((spec & DMTF_MEASUREMENT_SPEC) === 0) {
      throw new GpuEvidenceError('ERR_SPDM_UNSUPPORTED', `measurement block ${index} is not a DMTF measurement (specification 0x${spec.toString(16)})`);
    }
    const valueType = body.u8('the value type');
    const valueSize = body.u16('the value size');
    const value = body.take(valueSize, 'the value').slice();
    if (body.offset !== size)
      throw new GpuEvidenceError('ERR_SPDM_MALFORMED', `measurement block ${index} is ${size} bytes but its value ends at ${body.offset}`);
    if (blocks.some((b) => b.index === index)) throw new GpuEvidenceError('ERR_SPDM_MALFORMED', `measurement index ${index} appears twice`);
    blocks.push({ index, valueType, value });
  }
  if (blocks.length !== count)
    throw new GpuEvidenceError('ERR_SPDM_MALFORMED', `the response announces ${count} measurement blocks but its record holds ${blocks.length}`);
  return blocks;
}

/**
 * Reads what NVML returns as a GPU attestation report: the SPDM 1.1 GET_MEASUREMENTS request (with the
 * requester's nonce) followed by the signed MEASUREMENTS response (DSP0274 10.11), whose signature is ECDSA P-384.
 */
export function readSpdmMeasurementReport(bytes: Uint8Array): SpdmMeasurementReport {
  const cursor = new Cursor(bytes, 'the GPU attestation report');
  const reqVersion = cursor.u8('the request version');
  const reqCode = cursor.u8('the request code');
  if (reqCode !== SPDM_GET_MEASUREMENTS)
    throw new GpuEvidenceError(
      'ERR_SPDM_MALFORMED',
      `the report does not start with a GET_MEASUREMENTS request (code 0x${reqCode.toString(16)}, expected 0xe0)`,
    );
  if (reqVersion !== SPDM_VERSION_1_1)
    throw new GpuEvidenceError(
      'ERR_SPDM_UNSUPPORTED',
      `SPDM version ${reqVersion >> 4}.${reqVersion & 0xf} is not supported (only 1.1, as Hopper GPUs answer)`,
    );
  const reqParam1 = cursor.u8('the request param1');
  const reqParam2 = cursor.u8('the request param2');
  if ((reqParam1 & SIGNATURE_REQUESTED) === 0)
    throw new GpuEvidenceError('ERR_SPDM_MALFORMED', 'the request did not ask for a signed answer, so nothing vouches for the measurements');
  const requestNonce = cursor.take(SPDM_NONCE_BYTES, 'the request nonce').slice();
  const slotId = cursor.u8('the request slot id');

  const version = cursor.u8('the response version');
  const code = cursor.u8('the response code');
  if (code !== SPDM_MEASUREMENTS)
    throw new GpuEvidenceError('ERR_SPDM_MALFORMED', `the response is not MEASUREMENTS (code 0x${code.toString(16)}, expected 0x60)`);
  if (version !== reqVersion)
    throw new GpuEvidenceError('ERR_SPDM_MALFORMED', `the response version 0x${version.toString(16)} differs from the request's 0x${reqVersion.toString(16)}`);
  const param1 = cursor.u8('the response param1');
  const param2 = cursor.u8('the response param2');
  const blockCount = cursor.u8('the number of blocks');
  const recordLength = cursor.u24('the record length');
  const blocks = readBlocks(cursor.take(recordLength, 'the measurement record'), blockCount);
  const responseNonce = cursor.take(SPDM_NONCE_BYTES, 'the response nonce').slice();
  const opaqueLength = cursor.u16('the opaque data length');
  const opaque = readOpaqueFields(cursor.take(opaqueLength, 'the opaque data'));
  const signedLength = cursor.offset;
  const signature = cursor.take(SPDM_P384_SIGNATURE_BYTES, 'the signature').slice();
  const trailing = bytes.subarray(cursor.offset);
  if (trailing.some((b) => b !== 0)) {
    throw new GpuEvidenceError(
      'ERR_SPDM_MALFORMED',
      `${trailing.length} byte(s) after the signature are not zero padding: data nobody signed follows the report`,
    );
  }
  return {
    request: { version: reqVersion, param1: reqParam1, param2: reqParam2, nonce: requestNonce, slotId },
    response: { version, param1, param2, nonce: responseNonce },
    blocks,
    opaque,
    firmware: firmwareInfo(opaque),
    signedBytes: bytes.slice(0, signedLength),
    signature,
    trailingZeroBytes: trailing.length,
  };
}
