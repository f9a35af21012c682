import { MeasureError } from './errors.ts';
import { computeMrtd, type PageAddOrder } from './mrtd.ts';
import { authenticodeDigest } from './pe-authenticode.ts';
import { qemuPatchedKernel } from './qemu-kernel-setup.ts';
import { rtmrFromDigests, sha384 } from './rtmr.ts';
import { tdHobDigest } from './td-hob.ts';
import { rtmr0Events, rtmr1Events, rtmr2Events } from './tdx-boot-events.ts';
import { readTdvfMetadata, TdvfSectionType } from './tdvf-metadata.ts';

export interface TdxMeasureInput {
  firmware: Uint8Array;
  pageAddOrder: PageAddOrder;
  /** Guest memory in bytes; needed for RTMR0 (the TD HOB) and RTMR1 (QEMU writes the initrd address into the kernel). */
  memorySize: number | null;
  acpiDataSize: number;
  /** Measured direct boot, or null for none. */
  boot: { kernel: Uint8Array; initrd: Uint8Array; cmdline: string } | null;
  /** The firmware configuration RTMR0 covers besides the firmware itself, or null when not given. */
  config: { acpiLoader: Uint8Array; acpiRsdp: Uint8Array; acpiTables: Uint8Array; bootVariables: Uint8Array[] } | null;
}

export interface TdxMeasurements {
  mrtd: Buffer;
  rtmr0: Buffer | null;
  rtmr1: Buffer | null;
  rtmr2: Buffer | null;
}

function needMemory(memorySize: number | null, what: string): number {
  if (memorySize === null) throw new MeasureError('ERR_MEASURE_INPUT', `${what} depends on the guest memory size: give it`);
  return memorySize;
}

/** MRTD always; RTMR1 and RTMR2 with a kernel; RTMR0 with the firmware configuration and ACPI tables. */
export function measureTdx(input: TdxMeasureInput): TdxMeasurements {
  const sections = readTdvfMetadata(input.firmware);
  const mrtd = computeMrtd(input.firmware, sections, input.pageAddOrder);
  let rtmr0: Buffer | null = null;
  if (input.config !== null) {
    const cfv = sections.find((s) => s.type === TdvfSectionType.CFV);
    if (cfv === undefined)
      throw new MeasureError('ERR_MEASURE_FIRMWARE', "the firmware's TDX metadata has no configuration volume (CFV) section, which RTMR0 measures");
    rtmr0 = rtmrFromDigests(
      rtmr0Events({
        tdHob: tdHobDigest(sections, needMemory(input.memorySize, 'RTMR0 (the TD HOB)')),
        cfv: sha384(input.firmware.subarray(cfv.dataOffset, cfv.dataOffset + cfv.rawDataSize)),
        acpiLoader: sha384(input.config.acpiLoader),
        acpiRsdp: sha384(input.config.acpiRsdp),
        acpiTables: sha384(input.config.acpiTables),
        bootVariables: input.config.bootVariables.map(sha384),
      }),
    );
  }
  if (input.boot === null) return { mrtd, rtmr0, rtmr1: null, rtmr2: null };
  const { kernel, initrd, cmdline } = input.boot;
  const memorySize = initrd.length > 0 ? needMemory(input.memorySize, 'RTMR1 (QEMU writes the initrd address into the kernel)') : (input.memorySize ?? 0);
  const patched = qemuPatchedKernel(kernel, { initrdSize: initrd.length, memorySize, acpiDataSize: input.acpiDataSize });
  return { mrtd, rtmr0, rtmr1: rtmrFromDigests(rtmr1Events(authenticodeDigest(patched, 'sha384'))), rtmr2: rtmrFromDigests(rtmr2Events(cmdline, initrd)) };
}
