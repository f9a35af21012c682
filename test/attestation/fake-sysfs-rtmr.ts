/**
 * A stand-in for the TDX guest driver's `measurements/rtmr3:sha384` attribute over a real temporary directory. A
 * plain file cannot extend on write, so this implements the kernel's semantics behind the RtmrFs seam: a write of
 * exactly 48 bytes makes the register SHA-384(old || written); any other size is EINVAL; an absent attribute is
 * ENOENT (never created); `refuse` makes every write fail with that errno, as a read-only attribute does.
 */
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RtmrFs } from '../../src/attestation/self-measurement.ts';

const errno = (code: string, path: string) => Object.assign(new Error(`${code}: ${path}`), { code });

export class FakeSysfsRtmr implements RtmrFs {
  readonly root: string;
  /** The attribute's path: <root>/class/misc/tdx_guest/measurements/rtmr3:sha384. */
  readonly rtmrPath: string;
  /** Every 48-byte write that extended the register, in order. */
  readonly writes: Uint8Array[] = [];
  refuse: string | undefined;

  private constructor(root: string) {
    this.root = root;
    this.rtmrPath = join(root, 'class/misc/tdx_guest/measurements/rtmr3:sha384');
  }

  /** A machine whose RTMR3 starts at `initial` (all zero by default), or without the attribute when `absent`. */
  static async create(opts: { initial?: Uint8Array; absent?: boolean } = {}): Promise<FakeSysfsRtmr> {
    const fake = new FakeSysfsRtmr(await mkdtemp(join(tmpdir(), 'sigil-sysfs-')));
    if (opts.absent !== true) {
      await mkdir(join(fake.root, 'class/misc/tdx_guest/measurements'), { recursive: true });
      await writeFile(fake.rtmrPath, opts.initial ?? new Uint8Array(48));
    }
    return fake;
  }

  async read(path: string): Promise<Uint8Array> {
    return new Uint8Array(await readFile(path));
  }

  async extend(path: string, digest: Uint8Array): Promise<void> {
    if (this.refuse !== undefined) throw errno(this.refuse, path);
    const old = await readFile(path).catch((err: NodeJS.ErrnoException) => {
      throw errno(err.code ?? 'EIO', path);
    });
    if (digest.length !== 48) throw errno('EINVAL', path);
    this.writes.push(Uint8Array.from(digest));
    await writeFile(path, createHash('sha384').update(old).update(digest).digest());
  }

  /** The register's value now. */
  async value(): Promise<Buffer> {
    return readFile(this.rtmrPath);
  }

  async dispose(): Promise<void> {
    await rm(this.root, { recursive: true, force: true });
  }
}
