import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MeasureError } from '../../src/measure/errors.ts';
import { authenticodeDigest } from '../../src/measure/pe-authenticode.ts';
import { qemuPatchedKernel } from '../../src/measure/qemu-kernel-setup.ts';

/** Debian's fwupd EFI application, signed for Secure Boot: its signature carries its Authenticode SHA-256. */
const SIGNED = readFileSync(new URL('../vectors/measure/pe/fwupdx64.efi.signed', import.meta.url));

/** The digest inside the signature's SpcIndirectDataContent: the first SHA-256 DigestInfo (OID, NULL, 32-byte OCTET STRING). */
function signedDigest(image: Buffer): string {
  const digestInfo = Buffer.from('0609608648016503040201050004 20'.replace(/ /g, ''), 'hex');
  const at = image.indexOf(digestInfo);
  expect(at).toBeGreaterThan(0);
  return image.subarray(at + digestInfo.length, at + digestInfo.length + 32).toString('hex');
}

describe('the kernel digest OVMF measures into RTMR1', () => {
  it("hashes a PE image exactly as its signer's Authenticode signature says", () => {
    expect(authenticodeDigest(SIGNED, 'sha256').toString('hex')).toBe(signedDigest(SIGNED));
  });

  it('leaves the checksum and the signature out of the digest', () => {
    const changed = Buffer.from(SIGNED);
    const pe = changed.readUInt32LE(0x3c);
    changed.writeUInt32LE(0xdeadbeef, pe + 4 + 20 + 64); // CheckSum
    changed.writeUInt8(changed.readUInt8(changed.length - 1) ^ 0xff, changed.length - 1); // inside the certificate table at the end of the file
    expect(authenticodeDigest(changed, 'sha384').equals(authenticodeDigest(SIGNED, 'sha384'))).toBe(true);
    changed.writeUInt8(changed.readUInt8(0x400) ^ 0xff, 0x400);
    expect(authenticodeDigest(changed, 'sha384').equals(authenticodeDigest(SIGNED, 'sha384'))).toBe(false);
  });

  it("keeps an older kernel's initrd below its initrd_addr_max", () => {
    const kernel = Buffer.alloc(0x1000);
    kernel.write('HdrS', 0x202, 'latin1');
    kernel.writeUInt16LE(0x020b, 0x206);
    kernel[0x211] = 0x01;
    kernel.writeUInt32LE(0x37ffffff, 0x22c);
    expect(qemuPatchedKernel(kernel, { initrdSize: 0x100000, memorySize: 2 * 2 ** 30, acpiDataSize: 0x28000 }).readUInt32LE(0x218)).toBe(0x37eff000);
  });

  it('patches an image without the HdrS magic as QEMU does, as boot protocol 0, and refuses it an initrd', () => {
    const image = Buffer.alloc(0x1000);
    image.writeUInt16LE(0x020f, 0x206);
    const patched = qemuPatchedKernel(image, { initrdSize: 0, memorySize: 2 ** 31, acpiDataSize: 0x28000 });
    expect([patched.readUInt16LE(0x20), patched.readUInt16LE(0x22), patched[0x210]]).toEqual([0xa33f, 0xa000, 0]);
    expect(() => qemuPatchedKernel(image, { initrdSize: 1, memorySize: 2 ** 31, acpiDataSize: 0x28000 })).toThrow(
      "the kernel's boot protocol is too old to take an initrd",
    );
  });

  it('refuses a kernel that is not a PE image', () => {
    expect(() => authenticodeDigest(Buffer.alloc(4096), 'sha384')).toThrow(
      new MeasureError('ERR_MEASURE_INPUT', 'the kernel is not a PE/COFF image UEFI can start: no MZ header'),
    );
  });

  it("writes QEMU's direct-boot fields into a modern kernel's setup header, the initrd at the top of low memory below the ACPI data", () => {
    const kernel = Buffer.alloc(0x1000);
    kernel.write('HdrS', 0x202, 'latin1');
    kernel.writeUInt16LE(0x020f, 0x206); // boot protocol 2.15
    kernel[0x211] = 0x01; // LOADED_HIGH
    kernel.writeUInt16LE(0x02, 0x236); // XLF_CAN_BE_LOADED_ABOVE_4G: the initrd may go anywhere below 4 GiB
    const patched = qemuPatchedKernel(kernel, { initrdSize: 0x100000, memorySize: 2 * 2 ** 30, acpiDataSize: 0x28000 });
    expect(patched[0x210]).toBe(0xb0);
    expect(patched[0x211]).toBe(0x81);
    expect(patched.readUInt32LE(0x224)).toBe(0x20000 - 0x10000 - 0x200);
    expect(patched.readUInt32LE(0x228)).toBe(0x20000);
    expect(patched.readUInt32LE(0x218)).toBe(0x7fed7000); // (2 GiB - 0x28000 - 1 - 1 MiB) rounded down to a page
    expect(patched.readUInt32LE(0x21c)).toBe(0x100000);
    // From 2.75 GiB on QEMU keeps only 2 GiB below 4 GiB, so 64 GiB places the initrd where 2 GiB does.
    expect(qemuPatchedKernel(kernel, { initrdSize: 0x100000, memorySize: 64 * 2 ** 30, acpiDataSize: 0x28000 }).readUInt32LE(0x218)).toBe(0x7fed7000);
    expect(qemuPatchedKernel(kernel, { initrdSize: 0x100000, memorySize: 2.5 * 2 ** 30, acpiDataSize: 0x28000 }).readUInt32LE(0x218)).toBe(0x9fed7000);
  });
});
