import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { readSevFirmwareLayout } from '../../src/measure/ovmf-sev-metadata.ts';
import { cmdlineDigest, sevHashesTable, sha256 } from '../../src/measure/sev-hashes.ts';
import { BSP_EIP, resetVmsa } from '../../src/measure/vmsa.ts';

const SNP = new URL('../vectors/measure/snp/', import.meta.url).pathname;
const read = (path: string) => readFileSync(`${SNP}${path}`);
const apEip = readSevFirmwareLayout(read('virtee-sev-snp-measure/fixtures/ovmf_AmdSev_suffix.bin')).sevEsResetEip!;

// The dumps are sev-snp-measure's own VMSA pages (dump_vmsa=True), a byte-level aid; the digests that use them are tested against published values.
describe('the initial vCPU state is laid out byte for byte as sev-snp-measure lays it out', () => {
  it.each([
    ['qemu', 0x1n, 'qemu_epyc-v4_features_0x1'],
    ['qemu', 0x21n, 'qemu_epyc-v4_features_0x21'],
    ['ec2', 0x1n, 'ec2_epyc-v4_features_0x1'],
  ] as const)('%s with guest features %s', (vmm, features, dir) => {
    expect(resetVmsa(BSP_EIP, features, 0x800f12, vmm).equals(read(`derived-debug/${dir}/vmsa0.bin`))).toBe(true);
    expect(resetVmsa(apEip, features, 0x800f12, vmm).equals(read(`derived-debug/${dir}/vmsa1.bin`))).toBe(true);
  });

  it('builds the kernel-hashes table for an empty kernel and initrd', () => {
    const table = sevHashesTable({ kernel: sha256(new Uint8Array()), initrd: sha256(new Uint8Array()), cmdline: cmdlineDigest('console=ttyS0 loglevel=7') });
    expect(table.equals(read('derived-debug/sev_hashes_table_empty_kernel_initrd_cmdline_console.bin'))).toBe(true);
  });
});
