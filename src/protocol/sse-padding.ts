/**
 * Token-length padding for event streams (docs/ehbp.md, "Padding"): a write of whole SSE lines is made a multiple of
 * `bucket` bytes by one comment line (`:` then dots, then LF), which every SSE parser ignores, so that a sealed frame
 * no longer tells an observer how long the tokens in it are. The line goes after the write when the write ends a
 * line, else before it when the write starts one; a write that does neither (a CRLF split across writes) is not padded.
 */
const COLON = 0x3a;
const DOT = 0x2e;
const LF = 0x0a;

/** The shortest comment line: `:` and LF. */
const MIN_LINE = 2;

export type PaddingPlace = 'after' | 'before';

export function padSseWrite(bytes: Buffer, bucket: number, place: PaddingPlace): Buffer {
  const short = bytes.length % bucket;
  if (short === 0) return bytes;
  let length = bucket - short;
  if (length < MIN_LINE) length += bucket;
  const line = Buffer.alloc(length, DOT);
  line[0] = COLON;
  line[length - 1] = LF;
  return place === 'after' ? Buffer.concat([bytes, line], bytes.length + length) : Buffer.concat([line, bytes], bytes.length + length);
}
