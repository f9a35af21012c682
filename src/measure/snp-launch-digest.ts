import { MeasureError } from './errors.ts';
import { LaunchDigest, PageType } from './gctx.ts';
import { readSevFirmwareLayout, SectionType, SVSM_INFO_GUID, type SevFirmwareLayout } from './ovmf-sev-metadata.ts';
import { sevHashesPage, type KernelHashes } from './sev-hashes.ts';
import { BSP_EIP, resetVmsa, svsmVmsa, vmsaPages, type VmmType } from './vmsa.ts';

/** A hypervisor's way of starting a vCPU; `ec2-legacy` is EC2 before it set RDX to 0x600. */
export type SnpVmm = VmmType | 'ec2-legacy';

export interface SnpLaunchInput {
  layout: SevFirmwareLayout;
  /** The firmware image itself, or (`ovmfDigest`) the launch digest after its pages, as published. */
  firmware: { image: Uint8Array } | { ovmfDigest: Uint8Array };
  /** Measured direct boot's digests, or null when the VM boots without -kernel. */
  kernel: KernelHashes | null;
  vcpus: number;
  vcpuSig: number;
  guestFeatures: bigint;
  vmm: SnpVmm;
}

/** The launch digest after only the firmware's own pages: the value published as an "OVMF hash". */
export function ovmfLaunchDigest(image: Uint8Array, gpa: number): Buffer {
  const ld = new LaunchDigest();
  ld.normalPages(gpa, image);
  return ld.digest;
}

function kernelHashesSection(ld: LaunchDigest, layout: SevFirmwareLayout, kernel: KernelHashes | null, gpa: number, size: number): void {
  if (kernel === null) return ld.blankPages(PageType.ZERO, gpa, size);
  if (layout.sevHashesTableGpa === null)
    throw new MeasureError('ERR_MEASURE_FIRMWARE', 'the firmware has a kernel-hashes section but no kernel-hashes table address in its footer table');
  const page = sevHashesPage(kernel, layout.sevHashesTableGpa & 0xfff);
  if (size !== page.length)
    throw new MeasureError('ERR_MEASURE_UNSUPPORTED', `the firmware's kernel-hashes section is ${size} bytes; only one 4 KiB page is modelled`);
  ld.normalPages(gpa, page);
}

/** Measures the metadata sections in order; EC2 measures the CPUID page after all the others. */
export function measureMetadataSections(ld: LaunchDigest, layout: SevFirmwareLayout, kernel: KernelHashes | null, vmm: SnpVmm): void {
  const ec2 = vmm === 'ec2' || vmm === 'ec2-legacy';
  for (const { gpa, size, type } of layout.sections) {
    if (type === SectionType.SNP_SEC_MEM) ld.blankPages(vmm === 'gce' ? PageType.UNMEASURED : PageType.ZERO, gpa, size);
    else if (type === SectionType.SNP_SECRETS) ld.blankPages(PageType.SECRETS, gpa, 4096);
    else if (type === SectionType.CPUID) {
      if (!ec2) ld.blankPages(PageType.CPUID, gpa, 4096);
    } else if (type === SectionType.SNP_KERNEL_HASHES) kernelHashesSection(ld, layout, kernel, gpa, size);
    else ld.blankPages(PageType.ZERO, gpa, size);
  }
  if (ec2) for (const { gpa, type } of layout.sections) if (type === SectionType.CPUID) ld.blankPages(PageType.CPUID, gpa, 4096);
  if (kernel !== null && !layout.sections.some((s) => s.type === SectionType.SNP_KERNEL_HASHES)) {
    throw new MeasureError('ERR_MEASURE_FIRMWARE', "Kernel specified but OVMF metadata doesn't include SNP_KERNEL_HASHES section");
  }
}

function resetPages(vcpus: number, apEip: number | null, guestFeatures: bigint, vcpuSig: number, vmm: SnpVmm): Buffer[] {
  if (vmm === 'ec2-legacy') {
    const legacy = (eip: number) => {
      const page = resetVmsa(eip, guestFeatures, vcpuSig, 'ec2');
      page.writeBigUInt64LE(0n, 0x310);
      return page;
    };
    return vmsaPages(vcpus, legacy(BSP_EIP), apEip === null ? null : legacy(apEip));
  }
  return vmsaPages(vcpus, resetVmsa(BSP_EIP, guestFeatures, vcpuSig, vmm), apEip === null ? null : resetVmsa(apEip, guestFeatures, vcpuSig, vmm));
}

function checkVcpus(vcpus: number, apEip: number | null): void {
  if (!Number.isInteger(vcpus) || vcpus < 1)
    throw new MeasureError('ERR_MEASURE_INPUT', `the number of vCPUs must be a whole number of at least 1, got ${vcpus}`);
  if (vcpus > 1 && apEip === null)
    throw new MeasureError('ERR_MEASURE_FIRMWARE', 'the firmware gives no SEV-ES reset vector, so its application processors cannot start');
}

/** The SEV-SNP launch digest (the report's MEASUREMENT) of a guest booted by OVMF. */
export function snpLaunchDigest(input: SnpLaunchInput): Buffer {
  const { layout, kernel, vcpus, vmm } = input;
  checkVcpus(vcpus, layout.sevEsResetEip);
  const ld = 'image' in input.firmware ? new LaunchDigest() : new LaunchDigest(input.firmware.ovmfDigest);
  if ('image' in input.firmware) ld.normalPages(layout.gpa, input.firmware.image);
  measureMetadataSections(ld, layout, kernel, vmm);
  for (const page of resetPages(vcpus, layout.sevEsResetEip, input.guestFeatures, input.vcpuSig, vmm)) ld.vmsaPage(page);
  return ld.digest;
}

export interface SvsmLaunchInput {
  ovmf: Uint8Array;
  svsm: Uint8Array;
  /** The size of the OVMF variable store QEMU maps between the SVSM and the OVMF code. */
  ovmfVarsSize: number;
  vcpus: number;
  vcpuSig: number;
}

/** The launch digest of a guest whose firmware runs under a Coconut SVSM at VMPL0 (QEMU only). */
export function svsmLaunchDigest(input: SvsmLaunchInput): Buffer {
  const ovmf = readSevFirmwareLayout(input.ovmf);
  const svsm = readSevFirmwareLayout(input.svsm, ovmf.gpa - input.ovmfVarsSize);
  const entry = svsm.table.get(SVSM_INFO_GUID);
  if (entry === undefined || entry.length < 4)
    throw new MeasureError('ERR_MEASURE_FIRMWARE', 'the SVSM image has no SVSM information entry (its entry point) in its footer table');
  checkVcpus(input.vcpus, 0);
  const ld = new LaunchDigest();
  ld.normalPages(ovmf.gpa, input.ovmf);
  ld.normalPages(svsm.gpa, input.svsm);
  measureMetadataSections(ld, svsm, null, 'qemu');
  const page = svsmVmsa(entry.readUInt32LE(0) + svsm.gpa, input.vcpuSig);
  for (let i = 0; i < input.vcpus; i++) ld.vmsaPage(page);
  return ld.digest;
}
