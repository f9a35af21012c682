import { createHash } from 'node:crypto';
import { MeasureError } from './errors.ts';
import type { SevFirmwareLayout } from './ovmf-sev-metadata.ts';
import { sevHashesTable, type KernelHashes } from './sev-hashes.ts';
import { BSP_EIP, resetVmsa, vmsaPages, type VmmType } from './vmsa.ts';

export interface SevLaunchInput {
  image: Uint8Array;
  layout: SevFirmwareLayout;
  kernel: KernelHashes | null;
}

/** SEV and SEV-ES measure a kernel only through the firmware's kernel-hashes table. */
export function assertKernelMeasurable(layout: SevFirmwareLayout, kernel: KernelHashes | null): void {
  if (kernel !== null && layout.sevHashesTableGpa === null)
    throw new MeasureError('ERR_MEASURE_FIRMWARE', "Kernel specified but OVMF doesn't support kernel/initrd/cmdline measurement");
}

function measured(input: SevLaunchInput) {
  assertKernelMeasurable(input.layout, input.kernel);
  const hash = createHash('sha256').update(input.image);
  if (input.kernel !== null) hash.update(sevHashesTable(input.kernel));
  return hash;
}

/** The SEV (first generation) launch measurement's digest: SHA-256 over the firmware and the kernel-hashes table. */
export function sevLaunchDigest(input: SevLaunchInput): Buffer {
  return measured(input).digest();
}

/** SEV-ES adds each vCPU's initial state; guest features do not exist before SNP. */
export function sevEsLaunchDigest(input: SevLaunchInput & { vcpus: number; vcpuSig: number; vmm: VmmType }): Buffer {
  const hash = measured(input);
  const ap = input.layout.sevEsResetEip;
  if (input.vcpus > 1 && ap === null)
    throw new MeasureError('ERR_MEASURE_FIRMWARE', 'the firmware gives no SEV-ES reset vector, so its application processors cannot start');
  for (const page of vmsaPages(input.vcpus, resetVmsa(BSP_EIP, 0n, input.vcpuSig, input.vmm), ap === null ? null : resetVmsa(ap, 0n, input.vcpuSig, input.vmm)))
    hash.update(page);
  return hash.digest();
}
