import { EvidenceError } from '../errors.ts';
import { DSTACK_RUNTIME_EVENT } from './event-types.ts';
import { dstackRuntimeDigest, type MeasuredEvent } from './measured-event.ts';

const HEX = /^(?:[0-9a-fA-F]{2})*$/;

function malformed(message: string): EvidenceError {
  return new EvidenceError('ERR_EVENT_LOG_MALFORMED', message);
}

/** The events array, from the array itself, its JSON text, or a dstack GetQuote response `{quote, event_log}`. */
function eventsOf(value: unknown): unknown[] {
  let v = value;
  if (typeof v === 'object' && v !== null && !Array.isArray(v) && 'event_log' in v) v = (v as { event_log: unknown }).event_log;
  if (typeof v === 'string') {
    try {
      v = JSON.parse(v) as unknown;
    } catch {
      throw malformed('the event_log text is not JSON');
    }
  }
  if (!Array.isArray(v)) throw malformed('the dstack event log is not a JSON array of events');
  return v;
}

/**
 * Reads dstack's JSON event log: `[{imr, event_type, digest, event, event_payload}]`, `imr` being the RTMR index
 * 0-3. dstack leaves the digest of its own RTMR3 events empty; it is recomputed from the name and payload.
 */
export function readDstackEventLog(value: unknown): MeasuredEvent[] {
  return eventsOf(value).map((item, i) => {
    if (typeof item !== 'object' || item === null) throw malformed(`event ${i} is not an object`);
    const e = item as Record<string, unknown>;
    const { imr, event_type: type, digest, event, event_payload: payload } = e;
    if (typeof imr !== 'number' || !Number.isInteger(imr) || imr < 0 || imr > 3)
      throw malformed(`event ${i}: imr ${JSON.stringify(imr)} is not an RTMR index 0-3`);
    if (typeof type !== 'number' || !Number.isInteger(type) || type < 0 || type > 0xffffffff) throw malformed(`event ${i}: event_type is not a 32-bit number`);
    if (typeof digest !== 'string' || !HEX.test(digest)) throw malformed(`event ${i}: digest is not hex`);
    const name = typeof event === 'string' ? event : '';
    const data = typeof payload === 'string' && HEX.test(payload) ? new Uint8Array(Buffer.from(payload, 'hex')) : new Uint8Array(0);
    if (payload !== undefined && (typeof payload !== 'string' || !HEX.test(payload))) throw malformed(`event ${i}: event_payload is not hex`);
    let bytes: Uint8Array;
    if (digest === '' && type === DSTACK_RUNTIME_EVENT) bytes = dstackRuntimeDigest(type, name, data);
    else if (digest.length === 96) bytes = new Uint8Array(Buffer.from(digest, 'hex'));
    else throw malformed(`event ${i}: digest is ${digest.length / 2} bytes, not a SHA-384 digest (48)`);
    const out: MeasuredEvent = { source: 'dstack', rtmr: imr, type, digest: bytes, data };
    if (name !== '') out.name = name;
    return out;
  });
}
