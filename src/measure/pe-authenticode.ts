import { createHash } from 'node:crypto';
import { MeasureError } from './errors.ts';

function need(ok: boolean, what: string): void {
  if (!ok) throw new MeasureError('ERR_MEASURE_INPUT', `the kernel is not a PE/COFF image UEFI can start: ${what}`);
}

/**
 * The Authenticode digest (Microsoft PE/COFF specification, "Calculating the PE Image Hash"): the headers
 * without the checksum and the certificate-table entry, the sections in file order, any data after them
 * except the certificates, then zero padding to a multiple of 8 bytes. OVMF measures it with SHA-384 into
 * RTMR1; a signature carries it with the signer's hash, usually SHA-256.
 */
export function authenticodeDigest(image: Uint8Array, algorithm: 'sha256' | 'sha384'): Buffer {
  const data = Buffer.from(image.buffer, image.byteOffset, image.byteLength);
  need(data.length >= 0x40 && data.readUInt16LE(0) === 0x5a4d, 'no MZ header');
  const pe = data.readUInt32LE(0x3c);
  need(pe + 24 <= data.length && data.readUInt32LE(pe) === 0x4550, 'no PE signature');
  const coff = pe + 4;
  const sectionCount = data.readUInt16LE(coff + 2);
  const optionalSize = data.readUInt16LE(coff + 16);
  const optional = coff + 20;
  const magic = data.readUInt16LE(optional);
  need(magic === 0x10b || magic === 0x20b, `unknown optional header magic 0x${magic.toString(16)}`);
  const checksum = optional + 64;
  const certEntry = optional + (magic === 0x20b ? 112 : 96) + 4 * 8;
  const headersSize = data.readUInt32LE(optional + 60);
  need(certEntry + 8 <= headersSize && headersSize <= data.length, 'headers out of bounds');
  const hash = createHash(algorithm);
  hash.update(data.subarray(0, checksum));
  hash.update(data.subarray(checksum + 4, certEntry));
  hash.update(data.subarray(certEntry + 8, headersSize));
  const table = optional + optionalSize;
  need(table + sectionCount * 40 <= data.length, 'section table out of bounds');
  const sections: { offset: number; size: number }[] = [];
  for (let i = 0; i < sectionCount; i++) {
    const size = data.readUInt32LE(table + i * 40 + 16);
    if (size > 0) sections.push({ offset: data.readUInt32LE(table + i * 40 + 20), size });
  }
  sections.sort((a, b) => a.offset - b.offset);
  let hashed = headersSize;
  for (const { offset, size } of sections) {
    hash.update(data.subarray(offset, Math.min(offset + size, data.length)));
    hashed += size;
  }
  const certSize = data.readUInt32LE(certEntry + 4);
  const certAddress = data.readUInt32LE(certEntry);
  if (data.length > hashed) {
    const trailing = data.length - hashed - (certAddress > 0 ? certSize : 0);
    if (trailing > 0) hash.update(data.subarray(hashed, hashed + trailing));
  }
  if (data.length % 8 !== 0) hash.update(Buffer.alloc(8 - (data.length % 8)));
  return hash.digest();
}
