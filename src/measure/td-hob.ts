import { createHash } from 'node:crypto';
import { MeasureError } from './errors.ts';
import { TdvfSectionType, type TdvfSection } from './tdvf-metadata.ts';

const TWO_GIB = 0x8000_0000;
const FOUR_GIB = 0x1_0000_0000;
/** QEMU keeps 2 GiB below 4 GiB (the rest above) once guest memory reaches 2.75 GiB. */
const SPLIT_LOWMEM_FROM = 0xb000_0000;
const RESOURCE_SYSTEM_MEMORY = 0;
const RESOURCE_UNACCEPTED = 7;

interface Range {
  accepted: boolean;
  start: number;
  end: number;
}

/** The guest memory, with the ranges the firmware's TD HOB and temporary memory occupy marked accepted. */
function memoryRanges(sections: readonly TdvfSection[], memorySize: number): Range[] {
  let ranges: Range[] = [{ accepted: false, start: 0, end: memorySize }];
  for (const s of sections) {
    if (s.type !== TdvfSectionType.TD_HOB && s.type !== TdvfSectionType.TEMP_MEM) continue;
    const start = s.memoryAddress,
      end = s.memoryAddress + s.memoryDataSize;
    if (start >= end) continue;
    const next: Range[] = [];
    for (const r of ranges) {
      if (r.accepted || r.end <= start || r.start >= end) next.push(r);
      else {
        if (r.start < start) next.push({ accepted: false, start: r.start, end: start });
        if (r.end > end) next.push({ accepted: false, end: r.end, start: end });
      }
    }
    next.push({ accepted: true, start, end });
    ranges = next.sort((a, b) => a.start - b.start);
  }
  return ranges;
}

function resourceHob(type: number, start: number, length: number): Buffer {
  const hob = Buffer.alloc(48);
  hob.writeUInt16LE(0x0003, 0);
  hob.writeUInt16LE(48, 2);
  hob.writeUInt32LE(type, 24);
  hob.writeUInt32LE(7, 28); // present, initialized, tested
  hob.writeBigUInt64LE(BigInt(start), 32);
  hob.writeBigUInt64LE(BigInt(length), 40);
  return hob;
}

/**
 * The TD HOB QEMU hands TDVF (the hand-off block describing guest memory), as OVMF measures it into RTMR0:
 * the PHIT header, then a resource descriptor per memory range, without the end-of-list marker.
 */
export function tdHob(sections: readonly TdvfSection[], memorySize: number): Buffer {
  if (!Number.isSafeInteger(memorySize) || memorySize <= 0)
    throw new MeasureError('ERR_MEASURE_INPUT', `the memory size must be a positive number of bytes, got ${memorySize}`);
  const hobBase = sections.find((s) => s.type === TdvfSectionType.TD_HOB)?.memoryAddress;
  if (hobBase === undefined) throw new MeasureError('ERR_MEASURE_FIRMWARE', "the firmware's TDX metadata has no TD HOB section");
  const ranges = memoryRanges(sections, memorySize);
  const last = ranges.pop()!;
  const hobs = ranges.map((r) => resourceHob(r.accepted ? RESOURCE_SYSTEM_MEMORY : RESOURCE_UNACCEPTED, r.start, r.end - r.start));
  if (memorySize >= SPLIT_LOWMEM_FROM) {
    if (last.start < TWO_GIB) hobs.push(resourceHob(RESOURCE_UNACCEPTED, last.start, TWO_GIB - last.start));
    if (last.end > TWO_GIB) hobs.push(resourceHob(RESOURCE_UNACCEPTED, FOUR_GIB, last.end - TWO_GIB));
  } else {
    hobs.push(resourceHob(RESOURCE_UNACCEPTED, last.start, last.end - last.start));
  }
  const phit = Buffer.alloc(56);
  phit.writeUInt16LE(0x0001, 0);
  phit.writeUInt16LE(56, 2);
  phit.writeUInt32LE(9, 8); // PHIT version
  const length = 56 + hobs.length * 48;
  phit.writeBigUInt64LE(BigInt(hobBase + length + 8), 48); // EfiEndOfHobList, past the 8-byte end marker
  return Buffer.concat([phit, ...hobs]);
}

export function tdHobDigest(sections: readonly TdvfSection[], memorySize: number): Buffer {
  return createHash('sha384').update(tdHob(sections, memorySize)).digest();
}
