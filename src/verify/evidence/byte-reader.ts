import { EvidenceError, type EvidenceErrorCode } from './errors.ts';

/** Bounds-checked little-endian reads over evidence bytes; a short read throws the caller's truncation code. */
export class ByteReader {
  readonly bytes: Uint8Array;
  private readonly view: DataView;
  private readonly truncated: EvidenceErrorCode;
  private readonly what: string;

  constructor(bytes: Uint8Array, truncated: EvidenceErrorCode, what: string) {
    this.bytes = bytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.truncated = truncated;
    this.what = what;
  }

  get length(): number {
    return this.bytes.length;
  }

  need(offset: number, length: number): void {
    if (offset < 0 || length < 0 || offset + length > this.bytes.length) {
      throw new EvidenceError(this.truncated, `${this.what} truncated: need ${offset + length} bytes, have ${this.bytes.length}`);
    }
  }

  u16(offset: number): number {
    this.need(offset, 2);
    return this.view.getUint16(offset, true);
  }

  u32(offset: number): number {
    this.need(offset, 4);
    return this.view.getUint32(offset, true);
  }

  u64(offset: number): bigint {
    this.need(offset, 8);
    return this.view.getBigUint64(offset, true);
  }

  /** A copy, so parsed objects never alias the caller's buffer. */
  slice(offset: number, length: number): Uint8Array {
    this.need(offset, length);
    return this.bytes.slice(offset, offset + length);
  }
}

export function toHex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}
