import { MeasureError } from './errors.ts';
import { metadataBlock, readFooterTable } from './firmware-footer-table.ts';

export const SEV_HASH_TABLE_RV_GUID = '7255371f-3a3b-4b04-927b-1da6efa8d454';
export const SEV_ES_RESET_BLOCK_GUID = '00f771de-1a7e-4fcb-890e-68c77e2fb44e';
export const OVMF_SEV_METADATA_GUID = 'dc886566-984a-4798-a75e-5585a7bf67cc';
export const SVSM_INFO_GUID = 'a789a612-0597-4c4b-a49f-cbb1fe9d1ddd';
const FOUR_GIB = 0x1_0000_0000;

/** The kinds of memory OVMF's SEV metadata asks the VMM to prepare before launch. */
export const SectionType = {
  SNP_SEC_MEM: 1,
  SNP_SECRETS: 2,
  CPUID: 3,
  SVSM_CAA: 4,
  SNP_KERNEL_HASHES: 0x10,
} as const;
export type SectionType = (typeof SectionType)[keyof typeof SectionType];
const KNOWN_TYPES = new Set<number>(Object.values(SectionType));

export interface MetadataSection {
  gpa: number;
  size: number;
  type: SectionType;
}

/** What the launch digest needs from an OVMF (or SVSM) image; every field can also be given without the image. */
export interface SevFirmwareLayout {
  /** Guest-physical address of the image's first byte. */
  gpa: number;
  sections: MetadataSection[];
  /** Where QEMU writes the kernel-hashes table, or null when the firmware has no such table. */
  sevHashesTableGpa: number | null;
  /** The AP reset vector (SEV-ES and SNP), or null when the firmware gives none. */
  sevEsResetEip: number | null;
}

function u32At(entry: Buffer | undefined): number | null {
  return entry === undefined || entry.length < 4 ? null : entry.readUInt32LE(0);
}

/**
 * Reads the SEV metadata ("ASEV", version 1) the footer table points at. The item count decides how many
 * sections there are; the header's own length field is not trusted (dstack's published vector leaves it 0).
 */
function readSections(image: Buffer, table: Map<string, Buffer>): MetadataSection[] {
  const offsetFromEnd = u32At(table.get(OVMF_SEV_METADATA_GUID));
  if (offsetFromEnd === null) return [];
  const block = metadataBlock(image, offsetFromEnd, 'ASEV', 12);
  if (typeof block === 'string') throw new MeasureError('ERR_MEASURE_FIRMWARE', `the firmware is malformed: ${block}`);
  const { items: start, count } = block;
  const sections: MetadataSection[] = [];
  for (let i = 0; i < count; i++) {
    const at = start + i * 12;
    const type = image.readUInt32LE(at + 8);
    if (!KNOWN_TYPES.has(type))
      throw new MeasureError('ERR_MEASURE_UNSUPPORTED', `the firmware's SEV metadata has a section of unknown type 0x${type.toString(16)}`);
    sections.push({ gpa: image.readUInt32LE(at), size: image.readUInt32LE(at + 4), type: type as SectionType });
  }
  return sections;
}

/** Parses an OVMF image mapped so that it ends at `endAt` (4 GiB for OVMF; below the OVMF for an SVSM). */
export function readSevFirmwareLayout(image: Uint8Array, endAt: number = FOUR_GIB): SevFirmwareLayout & { table: Map<string, Buffer> } {
  const data = Buffer.from(image.buffer, image.byteOffset, image.byteLength);
  if (data.length % 4096 !== 0) throw new MeasureError('ERR_MEASURE_FIRMWARE', `the firmware image is ${data.length} bytes, not a whole number of 4 KiB pages`);
  const table = readFooterTable(data);
  const hashes = u32At(table.get(SEV_HASH_TABLE_RV_GUID));
  return {
    gpa: endAt - data.length,
    sections: readSections(data, table),
    sevHashesTableGpa: hashes === 0 ? null : hashes,
    sevEsResetEip: u32At(table.get(SEV_ES_RESET_BLOCK_GUID)),
    table,
  };
}
