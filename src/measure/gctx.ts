import { createHash } from 'node:crypto';
import { MeasureError } from './errors.ts';

/** The SNP page types the launch digest records (AMD SEV-SNP ABI, SNP_LAUNCH_UPDATE). */
export const PageType = { NORMAL: 1, VMSA: 2, ZERO: 3, UNMEASURED: 4, SECRETS: 5, CPUID: 6 } as const;
export type PageType = (typeof PageType)[keyof typeof PageType];

/** Every VMSA page is measured at this guest-physical address, whichever vCPU it belongs to. */
export const VMSA_GPA = 0xffff_ffff_f000;
const PAGE = 4096;
const ZEROS = Buffer.alloc(48);

function sha384(data: Uint8Array): Buffer {
  return createHash('sha384').update(data).digest();
}

/**
 * The SNP guest context's launch digest: each page updates it as SHA-384 of a 112-byte PAGE_INFO
 * (current digest, the page's digest, length, type, permissions, GPA).
 */
export class LaunchDigest {
  #digest: Buffer;

  constructor(seed: Uint8Array = ZEROS) {
    if (seed.length !== 48) throw new MeasureError('ERR_MEASURE_INPUT', `a launch digest seed is 48 bytes, got ${seed.length}`);
    this.#digest = Buffer.from(seed);
  }

  get digest(): Buffer {
    return Buffer.from(this.#digest);
  }

  update(type: PageType, gpa: number, contentsDigest: Uint8Array): void {
    const info = Buffer.alloc(0x70);
    this.#digest.copy(info, 0);
    Buffer.from(contentsDigest).copy(info, 48);
    info.writeUInt16LE(0x70, 96);
    info.writeUInt8(type, 98);
    info.writeBigUInt64LE(BigInt(gpa), 104);
    this.#digest = sha384(info);
  }

  normalPages(gpa: number, data: Uint8Array): void {
    if (data.length % PAGE !== 0) throw new MeasureError('ERR_MEASURE_FIRMWARE', 'measured data must be whole 4 KiB pages');
    for (let offset = 0; offset < data.length; offset += PAGE) this.update(PageType.NORMAL, gpa + offset, sha384(data.subarray(offset, offset + PAGE)));
  }

  vmsaPage(page: Uint8Array): void {
    if (page.length !== PAGE) throw new MeasureError('ERR_MEASURE_INPUT', 'a VMSA is one 4 KiB page');
    this.update(PageType.VMSA, VMSA_GPA, sha384(page));
  }

  /** Pages whose contents are not measured: ZERO, UNMEASURED, SECRETS and CPUID. */
  blankPages(type: PageType, gpa: number, size: number): void {
    if (size % PAGE !== 0) throw new MeasureError('ERR_MEASURE_FIRMWARE', 'a section must be whole 4 KiB pages');
    for (let offset = 0; offset < size; offset += PAGE) this.update(type, gpa + offset, ZEROS);
  }
}
