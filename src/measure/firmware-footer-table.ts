import { guidBytes, guidText } from './guid.ts';
import { MeasureError } from './errors.ts';

/** The GUID that closes OVMF's footer table, 32 bytes before the end of the image (the reset vector follows). */
export const FOOTER_TABLE_GUID = '96b582de-1fb2-45f7-baea-a366c55a082d';
const ENTRY_HEADER = 18; // u16 size then a 16-byte GUID, at the end of each entry
const FOOTER_GAP = 32;

/**
 * Reads OVMF's GUIDed footer table: entries of (data, u16 size, GUID) laid out backwards from the footer.
 * Returns each entry's data by GUID text; an image without the footer GUID has an empty table.
 */
export function readFooterTable(image: Uint8Array): Map<string, Buffer> {
  const table = new Map<string, Buffer>();
  const data = Buffer.from(image.buffer, image.byteOffset, image.byteLength);
  const footerStart = data.length - FOOTER_GAP - ENTRY_HEADER;
  if (footerStart < 0) return table;
  if (!data.subarray(footerStart + 2, footerStart + ENTRY_HEADER).equals(guidBytes(FOOTER_TABLE_GUID))) return table;
  const tableSize = data.readUInt16LE(footerStart) - ENTRY_HEADER;
  if (tableSize < 0 || tableSize > footerStart) return table;
  let end = footerStart;
  const start = footerStart - tableSize;
  while (end - start >= ENTRY_HEADER) {
    const size = data.readUInt16LE(end - ENTRY_HEADER);
    if (size < ENTRY_HEADER || size > end - start)
      throw new MeasureError('ERR_MEASURE_FIRMWARE', `the firmware's footer table has an entry of impossible size ${size}`);
    const guid = guidText(data.subarray(end - ENTRY_HEADER + 2, end));
    table.set(guid, data.subarray(end - size, end - ENTRY_HEADER));
    end -= size;
  }
  return table;
}

/**
 * Finds a metadata block the footer table points at by its distance from the image's end (the SEV and TDX
 * metadata both start: 4-byte signature, u32 length, u32 version 1, u32 item count) and checks that its
 * `count` items of `itemSize` bytes lie inside the image. Returns where the items start and how many.
 */
export function metadataBlock(image: Buffer, offsetFromEnd: number, signature: string, itemSize: number): { items: number; count: number } | string {
  const start = image.length - offsetFromEnd;
  if (offsetFromEnd > image.length || start + 16 > image.length) return `its ${signature} metadata pointer points outside the image`;
  if (image.toString('latin1', start, start + 4) !== signature) return `its ${signature} metadata does not start with the signature ${signature}`;
  const version = image.readUInt32LE(start + 8);
  if (version !== 1) return `its ${signature} metadata is version ${version}; only version 1 is known`;
  const count = image.readUInt32LE(start + 12);
  if (start + 16 + count * itemSize > image.length) return `its ${signature} metadata lists ${count} sections but the image ends first`;
  return { items: start + 16, count };
}
