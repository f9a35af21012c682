import { MeasureError } from './errors.ts';
/** A GUID as firmware stores it: the first three fields little-endian, the last two as written. */
export function guidBytes(guid: string): Buffer {
  const hex = guid.replace(/-/g, '');
  if (!/^[0-9a-fA-F]{32}$/.test(hex)) throw new MeasureError('ERR_MEASURE_INPUT', `not a GUID: ${guid}`);
  const raw = Buffer.from(hex, 'hex');
  return Buffer.concat([
    Buffer.from(raw.subarray(0, 4)).reverse(),
    Buffer.from(raw.subarray(4, 6)).reverse(),
    Buffer.from(raw.subarray(6, 8)).reverse(),
    raw.subarray(8),
  ]);
}

/** The text form of a GUID stored in firmware byte order. */
export function guidText(bytes: Uint8Array): string {
  const b = Buffer.from(bytes);
  const hex = Buffer.concat([
    Buffer.from(b.subarray(0, 4)).reverse(),
    Buffer.from(b.subarray(4, 6)).reverse(),
    Buffer.from(b.subarray(6, 8)).reverse(),
    b.subarray(8, 16),
  ]).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
