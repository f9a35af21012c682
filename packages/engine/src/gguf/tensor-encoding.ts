import type { GgmlTypeName } from './types.ts';

const Q8_0_BLOCK = 32;
const Q8_0_BLOCK_BYTES = 2 + Q8_0_BLOCK;

/** Bytes a tensor of `count` elements takes when stored as `type`. */
export function encodedSize(type: GgmlTypeName, count: number): number {
  if (type === 'F32') return count * 4;
  if (type === 'F16') return count * 2;
  if (count % Q8_0_BLOCK !== 0) throw new Error(`Q8_0 needs a multiple of ${Q8_0_BLOCK} elements, got ${count}`);
  return (count / Q8_0_BLOCK) * Q8_0_BLOCK_BYTES;
}

/** Writes `data` as `type` into `out` at `offset`, little-endian as ggml reads it. */
export function encodeTensor(type: GgmlTypeName, data: Float32Array, out: Buffer, offset: number): void {
  if (type === 'F32') {
    for (let i = 0; i < data.length; i++) out.writeFloatLE(data[i]!, offset + i * 4);
  } else if (type === 'F16') {
    for (let i = 0; i < data.length; i++) out.writeUInt16LE(toHalf(data[i]!), offset + i * 2);
  } else {
    encodeQ8_0(data, out, offset);
  }
}

/** Q8_0: per block of 32 values, an f16 scale d = max|x|/127, then 32 signed bytes round(x/d). */
function encodeQ8_0(data: Float32Array, out: Buffer, offset: number): void {
  for (let block = 0; block * Q8_0_BLOCK < data.length; block++) {
    const start = block * Q8_0_BLOCK;
    let amax = 0;
    for (let i = 0; i < Q8_0_BLOCK; i++) amax = Math.max(amax, Math.abs(data[start + i]!));
    const d = amax / 127;
    const at = offset + block * Q8_0_BLOCK_BYTES;
    out.writeUInt16LE(toHalf(d), at);
    const inverse = d === 0 ? 0 : 1 / d;
    for (let i = 0; i < Q8_0_BLOCK; i++) out.writeInt8(Math.round(data[start + i]! * inverse), at + 2 + i);
  }
}

const scratch = new DataView(new ArrayBuffer(4));

/** IEEE 754 binary16 bits of `value`, rounded to nearest even. */
export function toHalf(value: number): number {
  scratch.setFloat32(0, value);
  const bits = scratch.getUint32(0);
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff;
  let mantissa = bits & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa ? 0x200 : 0);
  const halfExponent = exponent - 127 + 15;
  if (halfExponent >= 0x1f) return sign | 0x7c00;
  if (halfExponent <= 0) {
    if (halfExponent < -10) return sign;
    mantissa |= 0x800000;
    const shift = 14 - halfExponent;
    const half = mantissa >>> shift;
    const remainder = mantissa & ((1 << shift) - 1);
    const midpoint = 1 << (shift - 1);
    return sign | (half + (remainder > midpoint || (remainder === midpoint && half & 1) ? 1 : 0));
  }
  const half = (halfExponent << 10) | (mantissa >>> 13);
  const remainder = mantissa & 0x1fff;
  return sign | (half + (remainder > 0x1000 || (remainder === 0x1000 && half & 1) ? 1 : 0));
}
