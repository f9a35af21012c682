import { MeasureError } from './errors.ts';
import { metadataBlock, readFooterTable } from './firmware-footer-table.ts';

export const TDX_METADATA_OFFSET_GUID = 'e47a6535-984a-4798-865e-4685a7bf8ec2';
const PAGE = 0x1000;

/** TDVF section types (Intel TDX Virtual Firmware Design Guide, "TDVF metadata"). */
export const TdvfSectionType = { BFV: 0, CFV: 1, TD_HOB: 2, TEMP_MEM: 3, PERM_MEM: 4, PAYLOAD: 5, PAYLOAD_PARAM: 6 } as const;
/** The section's pages are hashed into MRTD (TDH.MR.EXTEND). */
export const ATTRIBUTE_MR_EXTEND = 0x1;
/** The section is added after launch (TDH.MEM.PAGE.AUG) and so not measured at all. */
export const ATTRIBUTE_PAGE_AUG = 0x2;

export interface TdvfSection {
  /** Where the section's bytes start in the firmware image. */
  dataOffset: number;
  rawDataSize: number;
  memoryAddress: number;
  memoryDataSize: number;
  type: number;
  attributes: number;
}

/** Reads the TDVF metadata ("TDVF", version 1) the firmware's footer table points at. */
export function readTdvfMetadata(image: Uint8Array): TdvfSection[] {
  const data = Buffer.from(image.buffer, image.byteOffset, image.byteLength);
  const entry = readFooterTable(data).get(TDX_METADATA_OFFSET_GUID);
  if (entry === undefined || entry.length < 4)
    throw new MeasureError('ERR_MEASURE_FIRMWARE', 'the firmware has no TDX metadata entry in its footer table: it is not a TDX firmware (TDVF)');
  const offsetFromEnd = entry.readUInt32LE(entry.length - 4);
  const block = metadataBlock(data, offsetFromEnd, 'TDVF', 32);
  if (typeof block === 'string') throw new MeasureError('ERR_MEASURE_FIRMWARE', `the firmware is malformed: ${block}`);
  const { items: start, count } = block;
  const sections: TdvfSection[] = [];
  for (let i = 0; i < count; i++) {
    const at = start + i * 32;
    const section: TdvfSection = {
      dataOffset: data.readUInt32LE(at),
      rawDataSize: data.readUInt32LE(at + 4),
      memoryAddress: Number(data.readBigUInt64LE(at + 8)),
      memoryDataSize: Number(data.readBigUInt64LE(at + 16)),
      type: data.readUInt32LE(at + 24),
      attributes: data.readUInt32LE(at + 28),
    };
    const bad =
      section.memoryAddress % PAGE !== 0
        ? 'its address is not page-aligned'
        : section.memoryDataSize % PAGE !== 0
          ? 'its size is not whole pages'
          : section.memoryDataSize < section.rawDataSize
            ? 'it holds more bytes than the memory it fills'
            : section.dataOffset + section.rawDataSize > data.length
              ? 'its bytes lie outside the image'
              : null;
    if (bad !== null) throw new MeasureError('ERR_MEASURE_FIRMWARE', `the firmware's TDX metadata section ${i} is malformed: ${bad}`);
    sections.push(section);
  }
  return sections;
}
