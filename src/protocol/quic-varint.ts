/**
 * QUIC's variable-length integers (RFC 9000 §16): the two high bits of the first byte give the length (1, 2, 4 or 8
 * bytes), the rest is the value in network byte order. Binary HTTP (RFC 9292) and chunked Oblivious HTTP use them for
 * every length. Values above 2^53 - 1 are refused: no length Sigil reads comes near it.
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
  into[offset] |= [0x00, 0x40, 0, 0x80, 0, 0, 0, 0xc0][length - 1]!;
  return offset + length;
}

export function encodeVarint(value: number): Uint8Array {
  const out = new Uint8Array(varintLength(value));
  writeVarint(out, 0, value);
  return out;
}

/**
 * The integer at `offset` and the offset after it, or `undefined` when `bytes` ends before it does (a reader of a
 * stream then waits for more). Throws for a value above 2^53 - 1.
 */
export function readVarint(bytes: Uint8Array, offset: number): { value: number; next: number } | undefined {
  if (offset >= bytes.length) return undefined;
  const length = 1 << (bytes[offset]! >> 6);
  if (offset + length > bytes.length) return undefined;
  let value = bytes[offset]! & 0x3f;
  for (let i = 1; i < length; i++) value = value * 256 + bytes[offset + i]!;
  if (!Number.isSafeInteger(value)) throw new RangeError('a variable-length integer above 2^53 - 1');
  return { value, next: offset + length };
}
