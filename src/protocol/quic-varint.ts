/**
 * QUIC's variable-length integers (RFC 9000 §16): the two high bits of the first byte give the length (1, 2, 4 or 8
 * bytes), the rest is the value in network byte order. Binary HTTP (RFC 9292) and chunked Oblivious HTTP use them for
 * every length. A value above 2^53 - 1 is read inexactly, which is harmless: it is larger than any length, status or
 * count a reader accepts, so the reader refuses it as such.
 */

/** The bytes `value` takes: the shortest encoding, as RFC 9000 recommends. */
export function varintLength(value: number): 1 | 2 | 4 | 8 {
  if (value < 0x40) return 1;
  if (value < 0x4000) return 2;
  if (value < 0x4000_0000) return 4;
  return 8;
}

/** Writes `value` at `offset` of `into` in its shortest encoding; returns the offset after it. */
export function writeVarint(into: Uint8Array, offset: number, value: number): number {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`not a variable-length integer: ${value}`);
  const length = varintLength(value);
  let rest = value;
  for (let i = length - 1; i >= 0; i--) {
    into[offset + i] = rest % 256;
    rest = Math.floor(rest / 256);
  }
  into[offset] = into[offset]! | ({ 1: 0x00, 2: 0x40, 4: 0x80, 8: 0xc0 } as const)[length];
  return offset + length;
}

export function encodeVarint(value: number): Uint8Array {
  const out = new Uint8Array(varintLength(value));
  writeVarint(out, 0, value);
  return out;
}

/** The integer at `offset` and the offset after it, or `undefined` when `bytes` ends before it does (a reader of a stream then waits for more). */
export function readVarint(bytes: Uint8Array, offset: number): { value: number; next: number } | undefined {
  if (offset >= bytes.length) return undefined;
  const length = 1 << (bytes[offset]! >> 6);
  if (offset + length > bytes.length) return undefined;
  let value = bytes[offset]! & 0x3f;
  for (let i = 1; i < length; i++) value = value * 256 + bytes[offset + i]!;
  return { value, next: offset + length };
}
