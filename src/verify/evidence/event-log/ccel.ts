import { ByteReader } from '../byte-reader.ts';
import { EvidenceError } from '../errors.ts';
import { EV_NO_ACTION } from './event-types.ts';
import type { MeasuredEvent } from './measured-event.ts';

/** TPM_ALG_SHA384, the only bank a TDX RTMR has. */
export const TPM_ALG_SHA384 = 0x000c;
/** ACPI 6.5, 5.2.34 "Confidential Computing Event Log Table": CC type 2 is Intel TDX. */
export const CCEL_CC_TYPE_TDX = 2;
export const CCEL_TABLE_LENGTH = 56;

/** The CCEL ACPI table (/sys/firmware/acpi/tables/CCEL): where the firmware put the log, and for which TEE. */
export interface CcelTable {
  length: number;
  revision: number;
  oemId: string;
  ccType: number;
  ccSubtype: number;
  /** Log Area Minimum Length: the size of the log area (/sys/firmware/acpi/tables/data/CCEL). */
  logAreaLength: bigint;
  /** Log Area Start Address (a guest-physical address; shown, never used). */
  logAreaStart: bigint;
}

export function readCcelTable(bytes: Uint8Array): CcelTable {
  const r = new ByteReader(bytes, 'ERR_CCEL_TABLE', 'CCEL ACPI table');
  r.need(0, CCEL_TABLE_LENGTH);
  const signature = Buffer.from(r.slice(0, 4)).toString('latin1');
  if (signature !== 'CCEL') throw new EvidenceError('ERR_CCEL_TABLE', `the ACPI table's signature is ${JSON.stringify(signature)}, not "CCEL"`);
  const length = r.u32(4);
  if (length !== bytes.length) throw new EvidenceError('ERR_CCEL_TABLE', `the CCEL table says it is ${length} bytes long but ${bytes.length} were given`);
  const sum = bytes.reduce((acc, b) => (acc + b) & 0xff, 0);
  if (sum !== 0) throw new EvidenceError('ERR_CCEL_TABLE', `the CCEL table's bytes do not sum to zero (checksum off by ${sum})`);
  return {
    length,
    revision: bytes[8]!,
    oemId: Buffer.from(r.slice(10, 6))
      .toString('latin1')
      .replace(/[\0 ]+$/, ''),
    ccType: bytes[36]!,
    ccSubtype: bytes[37]!,
    logAreaLength: r.u64(40),
    logAreaStart: r.u64(48),
  };
}

/** The header of a crypto-agile log: the SHA-1-format Spec ID event, which names the digest sizes. */
interface SpecIdEvent {
  digestSizes: Map<number, number>;
  end: number;
}

function readSpecId(r: ByteReader): SpecIdEvent {
  // TCG_PCClientPCREvent: pcrIndex (4), eventType (4), SHA-1 digest (20), eventSize (4), event.
  const type = r.u32(4);
  const size = r.u32(28);
  r.need(32, size);
  const signature = Buffer.from(r.slice(32, 16)).toString('latin1');
  if (type !== EV_NO_ACTION || signature !== 'Spec ID Event03\0') {
    throw new EvidenceError('ERR_EVENT_LOG_MALFORMED', 'the event log does not start with a TCG "Spec ID Event03" (it is not a crypto-agile TCG2 log)');
  }
  // TCG_EfiSpecIdEvent: signature (16), platformClass (4), versions (3), uintnSize (1), numberOfAlgorithms (4), {algId (2), size (2)}...
  const count = r.u32(32 + 24);
  const digestSizes = new Map<number, number>();
  for (let i = 0; i < count; i++) digestSizes.set(r.u16(32 + 28 + 4 * i), r.u16(32 + 30 + 4 * i));
  if (digestSizes.get(TPM_ALG_SHA384) !== 48)
    throw new EvidenceError('ERR_EVENT_LOG_MALFORMED', 'the event log has no SHA-384 digests, the bank TDX RTMRs use');
  return { digestSizes, end: 32 + size };
}

/**
 * Reads the TCG2 crypto-agile event log a TDX firmware leaves in the CCEL log area. The log ends at the first
 * event slot that is all 0xFF or all zero (the unused rest of the area). MR index 1-4 maps to RTMR0-3;
 * EV_NO_ACTION events are kept (for the listing) but never extended.
 */
export function readCcelEventLog(bytes: Uint8Array): MeasuredEvent[] {
  const r = new ByteReader(bytes, 'ERR_EVENT_LOG_TRUNCATED', 'CCEL event log');
  const spec = readSpecId(r);
  const events: MeasuredEvent[] = [];
  let at = spec.end;
  while (at + 8 <= bytes.length) {
    const mrIndex = r.u32(at);
    const type = r.u32(at + 4);
    if ((mrIndex === 0xffffffff && type === 0xffffffff) || (mrIndex === 0 && type === 0)) break;
    let o = at + 8;
    const count = r.u32(o);
    o += 4;
    let digest: Uint8Array | undefined;
    for (let i = 0; i < count; i++) {
      const alg = r.u16(o);
      const size = spec.digestSizes.get(alg);
      if (size === undefined)
        throw new EvidenceError(
          'ERR_EVENT_LOG_MALFORMED',
          `event at byte ${at} has a digest of algorithm 0x${alg.toString(16)}, which the Spec ID event does not declare`,
        );
      if (alg === TPM_ALG_SHA384) digest = r.slice(o + 2, size);
      o += 2 + size;
    }
    const dataSize = r.u32(o);
    const data = r.slice(o + 4, dataSize);
    o += 4 + dataSize;
    if (type !== EV_NO_ACTION) {
      if (digest === undefined) throw new EvidenceError('ERR_EVENT_LOG_MALFORMED', `event at byte ${at} has no SHA-384 digest`);
      if (mrIndex < 1 || mrIndex > 4)
        throw new EvidenceError('ERR_EVENT_LOG_MALFORMED', `event at byte ${at} extends MR index ${mrIndex}; a TDX log extends only 1-4 (RTMR0-3)`);
    }
    events.push({ source: 'ccel', rtmr: mrIndex - 1, type, digest: digest ?? new Uint8Array(48), data });
    at = o;
  }
  return events;
}

export function describeCcelTable(table: CcelTable): string {
  return `CCEL table revision ${table.revision} from ${table.oemId || 'an unnamed OEM'}, CC type ${table.ccType}, log area ${table.logAreaLength} bytes at 0x${table.logAreaStart.toString(16)}`;
}
