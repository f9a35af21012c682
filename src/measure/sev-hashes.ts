import { createHash } from 'node:crypto';
import { guidBytes } from './guid.ts';
import { MeasureError } from './errors.ts';

const TABLE_GUID = '9438d606-4f22-4cc9-b479-a793d411fd21';
const KERNEL_GUID = '4de79437-abd2-427f-b835-d5b172d2045b';
const INITRD_GUID = '44baf731-3a2f-4bd7-9af1-41e29169781d';
const CMDLINE_GUID = '97d02dd8-bd20-4c94-aa78-e7714d36ab2a';
const ENTRY_SIZE = 16 + 2 + 32;
const TABLE_SIZE = 16 + 2 + 3 * ENTRY_SIZE;

/** The SHA-256 digests QEMU puts in the kernel-hashes table for measured direct boot. */
export interface KernelHashes {
  kernel: Buffer;
  initrd: Buffer;
  cmdline: Buffer;
}

export function sha256(data: Uint8Array): Buffer {
  return createHash('sha256').update(data).digest();
}

/** The command line as QEMU hashes it: its UTF-8 bytes and a NUL; an absent command line is the NUL alone. */
export function cmdlineDigest(append: string | null): Buffer {
  return sha256(Buffer.concat([Buffer.from(append ?? '', 'utf8'), Buffer.alloc(1)]));
}

/** Digests from the files themselves: an absent initrd hashes as zero bytes. */
export function kernelHashes(kernel: Uint8Array, initrd: Uint8Array | null, append: string | null): KernelHashes {
  return { kernel: sha256(kernel), initrd: sha256(initrd ?? new Uint8Array()), cmdline: cmdlineDigest(append) };
}

function entry(guid: string, digest: Buffer): Buffer {
  if (digest.length !== 32) throw new MeasureError('ERR_MEASURE_INPUT', 'a kernel-hashes entry holds a 32-byte SHA-256');
  const out = Buffer.alloc(ENTRY_SIZE);
  guidBytes(guid).copy(out, 0);
  out.writeUInt16LE(ENTRY_SIZE, 16);
  digest.copy(out, 18);
  return out;
}

/** The table (header, then cmdline, initrd, kernel entries), zero-padded to a multiple of 16 bytes. */
export function sevHashesTable(hashes: KernelHashes): Buffer {
  const header = Buffer.alloc(18);
  guidBytes(TABLE_GUID).copy(header, 0);
  header.writeUInt16LE(TABLE_SIZE, 16);
  const table = Buffer.concat([header, entry(CMDLINE_GUID, hashes.cmdline), entry(INITRD_GUID, hashes.initrd), entry(KERNEL_GUID, hashes.kernel)]);
  const padded = Buffer.alloc((TABLE_SIZE + 15) & ~15);
  table.copy(padded);
  return padded;
}

/** The 4 KiB page the table lives in, at its offset within that page. */
export function sevHashesPage(hashes: KernelHashes, offsetInPage: number): Buffer {
  const table = sevHashesTable(hashes);
  if (offsetInPage + table.length > 4096) throw new MeasureError('ERR_MEASURE_FIRMWARE', 'the kernel-hashes table does not fit in its page');
  const page = Buffer.alloc(4096);
  table.copy(page, offsetInPage);
  return page;
}
