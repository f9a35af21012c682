import { createHash, type Hash } from 'node:crypto';
import { ATTRIBUTE_MR_EXTEND, ATTRIBUTE_PAGE_AUG, type TdvfSection } from './tdvf-metadata.ts';

const PAGE = 0x1000;
const CHUNK = 0x100;

/**
 * How the VMM adds the firmware's pages: `two-pass` adds every page of a section before extending any
 * (QEMU 8.x), `single-pass` extends each page right after adding it (QEMU 9 and later).
 */
export type PageAddOrder = 'two-pass' | 'single-pass';

function command(name: string, gpa: number): Buffer {
  const buffer = Buffer.alloc(128);
  buffer.write(name, 0, 'latin1');
  buffer.writeBigUInt64LE(BigInt(gpa), 16);
  return buffer;
}

function addPage(hash: Hash, section: TdvfSection, page: number): void {
  if ((section.attributes & ATTRIBUTE_PAGE_AUG) === 0) hash.update(command('MEM.PAGE.ADD', section.memoryAddress + page * PAGE));
}

function extendPage(hash: Hash, image: Buffer, section: TdvfSection, page: number): void {
  if ((section.attributes & ATTRIBUTE_MR_EXTEND) === 0) return;
  for (let chunk = 0; chunk < PAGE; chunk += CHUNK) {
    hash.update(command('MR.EXTEND', section.memoryAddress + page * PAGE + chunk));
    const from = section.dataOffset + page * PAGE + chunk;
    const bytes = Buffer.alloc(CHUNK);
    image.copy(bytes, 0, from, Math.min(from + CHUNK, section.dataOffset + section.rawDataSize));
    hash.update(bytes);
  }
}

/** MRTD: SHA-384 over the TDX module's record of every page added (and, for measured sections, its contents). */
export function computeMrtd(image: Uint8Array, sections: readonly TdvfSection[], order: PageAddOrder): Buffer {
  const data = Buffer.from(image.buffer, image.byteOffset, image.byteLength);
  const hash = createHash('sha384');
  for (const section of sections) {
    const pages = section.memoryDataSize / PAGE;
    if (order === 'two-pass') {
      for (let page = 0; page < pages; page++) addPage(hash, section, page);
      for (let page = 0; page < pages; page++) extendPage(hash, data, section, page);
    } else {
      for (let page = 0; page < pages; page++) {
        addPage(hash, section, page);
        extendPage(hash, data, section, page);
      }
    }
  }
  return hash.digest();
}
