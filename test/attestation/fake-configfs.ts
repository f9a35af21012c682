/**
 * A stand-in for configfs-tsm over a real temporary directory. configfs cannot be had on a normal filesystem
 * (writing `inblob` makes the kernel produce `outblob`; rmdir drops the attribute files), so this implements
 * those semantics behind the TsmFs seam: mkdir populates `provider` and `generation`, a write bumps
 * `generation` and fills `outblob`/`auxblob`, rmdir removes the entry with its files.
 */
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import type { TsmFs } from '../../src/attestation/configfs-tsm.ts';

export interface FakeEvidence {
  outblob: Uint8Array;
  auxblob?: Uint8Array;
}

export interface FakeConfigfsOptions {
  provider: 'sev_guest' | 'tdx_guest' | string;
  /** What the "firmware" returns for the 64 bytes written to inblob. */
  makeEvidence: (inblob: Uint8Array) => FakeEvidence;
  /** How many report attempts another writer disturbs (bumping generation between our reads). */
  interfereTimes?: number;
}

export class FakeConfigfs implements TsmFs {
  readonly tsmPath: string;
  readonly reportDir: string;
  /** Every entry created, in order, and every entry removed. */
  readonly created: string[] = [];
  readonly removed: string[] = [];
  readonly inblobs: Uint8Array[] = [];
  private interferences: number;

  private constructor(
    tsmPath: string,
    private readonly opts: FakeConfigfsOptions,
  ) {
    this.tsmPath = tsmPath;
    this.reportDir = join(tsmPath, 'report');
    this.interferences = opts.interfereTimes ?? 0;
  }

  static async create(opts: FakeConfigfsOptions): Promise<FakeConfigfs> {
    const root = await mkdtemp(join(tmpdir(), 'sigil-tsm-'));
    const fake = new FakeConfigfs(join(root, 'tsm'), opts);
    await mkdir(fake.reportDir, { recursive: true });
    return fake;
  }

  /** Entries still present under report/. */
  async entries(): Promise<string[]> {
    return readdir(this.reportDir);
  }

  async dispose(): Promise<void> {
    await rm(dirname(this.tsmPath), { recursive: true, force: true });
  }

  private async bump(entry: string): Promise<void> {
    const file = join(entry, 'generation');
    const n = Number.parseInt(await readFile(file, 'utf8'), 10);
    await writeFile(file, `${n + 1}\n`);
  }

  async mkdir(path: string): Promise<void> {
    if (dirname(path) !== this.reportDir) throw Object.assign(new Error(`EPERM: mkdir outside report/: ${path}`), { code: 'EPERM' });
    await mkdir(path);
    await writeFile(join(path, 'provider'), `${this.opts.provider}\n`);
    await writeFile(join(path, 'generation'), '0\n');
    this.created.push(basename(path));
  }

  async rmdir(path: string): Promise<void> {
    await rm(path, { recursive: true });
    this.removed.push(basename(path));
  }

  async readFile(path: string): Promise<Uint8Array> {
    if (basename(path) === 'outblob' && this.interferences > 0) {
      this.interferences -= 1;
      await this.bump(dirname(path));
    }
    return new Uint8Array(await readFile(path));
  }

  async writeFile(path: string, data: Uint8Array): Promise<void> {
    const entry = dirname(path);
    await writeFile(path, data);
    await this.bump(entry);
    if (basename(path) === 'inblob') {
      this.inblobs.push(Uint8Array.from(data));
      const evidence = this.opts.makeEvidence(Uint8Array.from(data));
      await writeFile(join(entry, 'outblob'), evidence.outblob);
      if (evidence.auxblob !== undefined) await writeFile(join(entry, 'auxblob'), evidence.auxblob);
    }
  }

  async isDirectory(path: string): Promise<boolean> {
    try {
      return (await stat(path)).isDirectory();
    } catch {
      return false;
    }
  }
}
