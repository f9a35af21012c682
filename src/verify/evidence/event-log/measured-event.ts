import { createHash } from 'node:crypto';
import { toHex } from '../byte-reader.ts';
import { DATA_IS_MEASURED, DSTACK_RUNTIME_EVENT, EV_EFI_VARIABLE_DRIVER_CONFIG, EV_EVENT_TAG, EV_IPL, eventTypeName } from './event-types.ts';

/** Where an event came from: the firmware's CCEL, dstack's JSON log, or Sigil's own runtime events. */
export type EventSource = 'ccel' | 'dstack' | 'sigil';

/** One event that extends (or, for EV_NO_ACTION, does not extend) a TDX RTMR. */
export interface MeasuredEvent {
  source: EventSource;
  /** RTMR index 0-3 (the CCEL's MR index 1-4 minus one). */
  rtmr: number;
  type: number;
  /** The SHA-384 digest extended into the RTMR. */
  digest: Uint8Array;
  /** The event data as logged (may be empty when the log leaves it out). */
  data: Uint8Array;
  /** A runtime event's name (dstack `event`, Sigil `event`). */
  name?: string;
}

/** How an event's logged data relates to its digest. */
export type DataState =
  /** SHA-384(data) is the digest: the data shown is exactly what was measured. */
  | 'measured'
  /** The data should hash to the digest (DATA_IS_MEASURED) and does not: the log misdescribes the event. */
  | 'mismatch'
  /** The digest covers content not in the log (a kernel image, an ACPI table); the data only describes it. */
  | 'describes'
  /** The log carries no data for this event. */
  | 'absent';

/** dstack's RTMR3 digest: SHA-384(event type as u32 little-endian || ":" || name || ":" || payload). */
export function dstackRuntimeDigest(type: number, name: string, payload: Uint8Array): Uint8Array {
  const typeBytes = Buffer.alloc(4);
  typeBytes.writeUInt32LE(type);
  return createHash('sha384').update(typeBytes).update(':').update(name, 'utf8').update(':').update(payload).digest();
}

/**
 * GRUB's string events (EV_IPL, data `<kind>: <text>` and a NUL): the digest is the SHA-384 of `<text>` alone, so the
 * command line a listing shows can be checked. Kinds from GRUB's TPM/CC measurement (grub-core/commands/tpm.c).
 */
const GRUB_STRING_KINDS = ['grub_cmd', 'kernel_cmdline', 'module_cmdline'] as const;

export function grubString(event: MeasuredEvent): { kind: string; text: string } | undefined {
  if (event.type !== EV_IPL || event.source !== 'ccel') return undefined;
  const data = Buffer.from(event.data).toString('latin1').replace(/\0$/, '');
  const kind = GRUB_STRING_KINDS.find((k) => data.startsWith(`${k}: `));
  return kind === undefined ? undefined : { kind, text: data.slice(kind.length + 2) };
}

export function dataState(event: MeasuredEvent): DataState {
  if (event.type === DSTACK_RUNTIME_EVENT && event.name !== undefined) {
    return Buffer.from(dstackRuntimeDigest(event.type, event.name, event.data)).equals(Buffer.from(event.digest)) ? 'measured' : 'mismatch';
  }
  const grub = grubString(event);
  if (grub !== undefined) {
    return createHash('sha384').update(grub.text, 'latin1').digest().equals(Buffer.from(event.digest)) ? 'measured' : 'mismatch';
  }
  if (event.data.length === 0 && event.source !== 'sigil') return 'absent';
  const digest = createHash('sha384').update(event.data).digest();
  if (digest.equals(Buffer.from(event.digest))) return 'measured';
  if (event.source === 'sigil') return 'mismatch';
  return DATA_IS_MEASURED.has(event.type) ? 'mismatch' : 'describes';
}

const PRINTABLE = /^[\x20-\x7e\t\r\n]*$/;

function utf16(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('utf16le').replace(/\0+$/, '');
}

/** The event data in words where its format is known (text, an EFI variable name, a tagged event), else hex. */
export function describeData(event: MeasuredEvent): string {
  const data = Buffer.from(event.data);
  if (data.length === 0) return '';
  if (event.source === 'sigil') return JSON.stringify(data.toString('utf8'));
  const grub = grubString(event);
  if (grub !== undefined) return `${JSON.stringify(grub.text.length > 200 ? `${grub.text.slice(0, 200)}...` : grub.text)} (GRUB ${grub.kind})`;
  // UEFI_VARIABLE_DATA: VariableName GUID (16), UnicodeNameLength (8), VariableDataLength (8), name (UTF-16), data.
  if ([EV_EFI_VARIABLE_DRIVER_CONFIG, 0x80000002, 0x8000000c].includes(event.type) && data.length >= 32) {
    const nameChars = Number(data.readBigUInt64LE(16));
    const dataLength = Number(data.readBigUInt64LE(24));
    if (32 + nameChars * 2 <= data.length) return `EFI variable ${utf16(data.subarray(32, 32 + nameChars * 2))} (${dataLength} bytes of data)`;
  }
  if (event.type === 0x800000e0 && data.length >= 32) {
    const nameChars = Number(data.readBigUInt64LE(16));
    if (32 + nameChars * 2 <= data.length) return `EFI variable ${utf16(data.subarray(32, 32 + nameChars * 2))}`;
  }
  // TCG_PCClientTaggedEvent: taggedEventID (4), taggedEventDataSize (4), data (Linux: "Linux initrd", LOAD_OPTIONS).
  if (event.type === EV_EVENT_TAG && data.length >= 8 && data.readUInt32LE(4) === data.length - 8) {
    const inner = data.subarray(8);
    const text = PRINTABLE.test(inner.toString('latin1').replace(/\0+$/, '')) ? inner.toString('latin1').replace(/\0+$/, '') : utf16(inner);
    return `tag 0x${data.readUInt32LE(0).toString(16)}: ${JSON.stringify(text)}`;
  }
  const text = data.toString('latin1').replace(/\0+$/, '');
  if (text.length > 0 && PRINTABLE.test(text)) return JSON.stringify(text.length > 200 ? `${text.slice(0, 200)}...` : text);
  const wide = utf16(data);
  if (data.length % 2 === 0 && wide.length > 0 && PRINTABLE.test(wide)) return JSON.stringify(wide);
  const hex = toHex(event.data);
  return hex.length > 64 ? `${data.length} bytes ${hex.slice(0, 64)}...` : hex;
}

/** One line of the event listing a report shows. */
export interface EventListing {
  index: number;
  source: EventSource;
  rtmr: number;
  type: string;
  digest: string;
  name?: string;
  data_state: DataState;
  /** The data in words; for `measured`, this is exactly what the digest covers. */
  data?: string;
}

export function listEvent(event: MeasuredEvent, index: number): EventListing {
  const type = event.source === 'sigil' ? 'SIGIL_RUNTIME_EVENT' : eventTypeName(event.type);
  const out: EventListing = { index, source: event.source, rtmr: event.rtmr, type, digest: toHex(event.digest), data_state: dataState(event) };
  if (event.name !== undefined) out.name = event.name;
  const data = describeData(event);
  if (data !== '') out.data = data;
  return out;
}

export function formatEventListing(e: EventListing): string {
  const what =
    e.data === undefined
      ? ''
      : e.data_state === 'measured'
        ? ` — measured data ${e.data}`
        : e.data_state === 'mismatch'
          ? ` — DATA DOES NOT HASH TO THE DIGEST: ${e.data}`
          : ` — describes ${e.data}`;
  const name = e.name === undefined ? '' : ` ${JSON.stringify(e.name)}`;
  return `  #${e.index} RTMR${e.rtmr} ${e.type}${name} ${e.digest.slice(0, 16)}...${what}`;
}
