/**
 * The Oblivious HTTP gateway's cryptography (RFC 9458 §4.3-4.4, draft-ietf-ohai-chunked-ohttp §6): encapsulated
 * requests opened with the enclave's HPKE key, their responses sealed, whole or chunk by chunk. The key is EHBP's
 * (src/ehbp/server-key.ts) and the key configuration is byte for byte the one the attestation binds as
 * `hpke_key_config`: the two protocols are kept apart by HPKE's `info` and exporter labels (docs/ohttp.md).
 */
import { randomBytes, type KeyObject } from 'node:crypto';
import { BaseModeSchedule, type BaseModeRecipient } from '../ehbp/base-recipient.ts';
import {
  AEADS,
  aeadOf,
  ENC_BYTES,
  KDF_HKDF_SHA256,
  KEM_X25519_HKDF_SHA256,
  ObliviousHttpError,
  parseKeyConfig,
  REQUEST_HEADER_BYTES,
  requestHeader,
  requestInfo,
  ResponseAead,
  responseExportLabel,
  responseNonceBytes,
  type Framing,
} from '../protocol/ohttp.ts';
import { encodeVarint, readVarint } from '../protocol/quic-varint.ts';
import { SigilError } from '../protocol/sigil-error.ts';

/** Why an encapsulated request could not be opened; `keyConfig` when it named a key or suite this gateway lacks. */
export class GatewayRefusal extends SigilError<'ERR_OHTTP_GATEWAY_REFUSAL'> {
  constructor(
    message: string,
    readonly keyConfig = false,
  ) {
    super('ERR_OHTTP_GATEWAY_REFUSAL', message);
  }
}

/** One opened request: its binary HTTP bytes, and the sealer of its response. */
export interface OpenedRequest {
  request: Uint8Array;
  enc: Uint8Array;
  response: GatewayResponse;
}

export class ObliviousGateway {
  readonly #privateKey: KeyObject;
  readonly #keyId: number;
  /** One key schedule per framing and AEAD: their constant part is computed once. */
  readonly #schedules = new Map<string, BaseModeSchedule>();

  /**
   * `keyConfig` is the bare key configuration the binding states (EHBP's): its key ID and the suites it lists that
   * this gateway can run (HKDF-SHA256 with AES-128-GCM or AES-256-GCM) are the ones accepted.
   */
  constructor(privateKey: KeyObject, keyConfig: Uint8Array) {
    const config = parseKeyConfig(keyConfig);
    if (config.kemId !== KEM_X25519_HKDF_SHA256) throw new ObliviousHttpError('the gateway key must be X25519');
    this.#privateKey = privateKey;
    this.#keyId = config.keyId;
    for (const algorithm of config.algorithms) {
      if (algorithm.kdfId !== KDF_HKDF_SHA256 || AEADS[algorithm.aeadId] === undefined) continue;
      for (const framing of ['whole', 'chunked'] as const) {
        const info = requestInfo(framing, requestHeader(this.#keyId, KEM_X25519_HKDF_SHA256, algorithm));
        this.#schedules.set(`${framing}/${algorithm.aeadId}`, new BaseModeSchedule({ aead: aeadOf(algorithm.aeadId).cipher }, info));
      }
    }
    if (this.#schedules.size === 0) throw new ObliviousHttpError('the key configuration lists no suite the gateway can run');
  }

  /**
   * Opens an encapsulated request. Its header must name this gateway's key ID, X25519, HKDF-SHA256 and an AEAD of
   * the key configuration (a refusal with `keyConfig` otherwise); a chunked request's chunks are opened in order and
   * must end with the final one. Throws GatewayRefusal without saying more than which step failed.
   */
  open(body: Uint8Array, framing: Framing): OpenedRequest {
    if (body.length < REQUEST_HEADER_BYTES + ENC_BYTES) throw new GatewayRefusal('The encapsulated request is shorter than its header.');
    const header = Buffer.from(body.buffer, body.byteOffset, REQUEST_HEADER_BYTES);
    const keyId = header.readUInt8(0);
    const kemId = header.readUInt16BE(1);
    const kdfId = header.readUInt16BE(3);
    const aeadId = header.readUInt16BE(5);
    const schedule = this.#schedules.get(`${framing}/${aeadId}`);
    if (keyId !== this.#keyId || kemId !== KEM_X25519_HKDF_SHA256 || kdfId !== KDF_HKDF_SHA256 || schedule === undefined) {
      throw new GatewayRefusal('The encapsulated request names a key or algorithms this gateway does not have: fetch its key configuration again.', true);
    }
    const enc = body.subarray(REQUEST_HEADER_BYTES, REQUEST_HEADER_BYTES + ENC_BYTES);
    let context: BaseModeRecipient;
    try {
      context = schedule.setup(this.#privateKey, enc);
    } catch {
      throw new GatewayRefusal('The encapsulated request could not be opened.');
    }
    const sealed = body.subarray(REQUEST_HEADER_BYTES + ENC_BYTES);
    const request = framing === 'whole' ? openOne(context, sealed, new Uint8Array(0)) : openChunks(context, sealed);
    return { request, enc: new Uint8Array(enc), response: new GatewayResponse(context, framing, aeadId, enc) };
  }
}

const FINAL = Buffer.from('final', 'latin1');

function openOne(context: BaseModeRecipient, sealed: Uint8Array, aad: Uint8Array): Buffer {
  try {
    return context.open(sealed, aad);
  } catch {
    throw new GatewayRefusal('The encapsulated request could not be opened.');
  }
}

function openChunks(context: BaseModeRecipient, chunks: Uint8Array): Buffer {
  const opened: Buffer[] = [];
  let offset = 0;
  for (;;) {
    const read = readVarint(chunks, offset);
    if (read === undefined) throw new GatewayRefusal('The chunked request ends before its final chunk.');
    if (read.value === 0) {
      opened.push(openOne(context, chunks.subarray(read.next), FINAL));
      return Buffer.concat(opened);
    }
    if (read.next + read.value > chunks.length) throw new GatewayRefusal('A request chunk is longer than the request.');
    const chunk = openOne(context, chunks.subarray(read.next, read.next + read.value), new Uint8Array(0));
    if (chunk.length === 0) throw new GatewayRefusal('A non-final request chunk is empty.');
    opened.push(chunk);
    offset = read.next + read.value;
  }
}

/**
 * The sealer of one response. Whole: `whole(bytes)` once. Chunked: `start()` (the nonce), `chunk(bytes)` for each
 * piece as it is ready, `final(bytes)` last; a stream cut before `final` is one the client sees as cut.
 */
export class GatewayResponse {
  readonly #nonce: Buffer;
  readonly #aead: ResponseAead;

  constructor(context: BaseModeRecipient, framing: Framing, aeadId: number, enc: Uint8Array) {
    const nonceBytes = responseNonceBytes(aeadId);
    this.#nonce = randomBytes(nonceBytes);
    this.#aead = new ResponseAead(aeadId, context.export(responseExportLabel(framing), nonceBytes), enc, this.#nonce);
  }

  whole(response: Uint8Array): Buffer {
    return Buffer.concat([this.#nonce, this.#aead.seal(response, false)]);
  }

  start(): Buffer {
    return this.#nonce;
  }

  chunk(piece: Uint8Array): Buffer {
    if (piece.length === 0) throw new ObliviousHttpError('a non-final chunk is never empty');
    const sealed = this.#aead.seal(piece, false);
    return Buffer.concat([encodeVarint(sealed.length), sealed]);
  }

  final(piece: Uint8Array): Buffer {
    return Buffer.concat([encodeVarint(0), this.#aead.seal(piece, true)]);
  }
}
