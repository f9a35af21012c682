/**
 * Hardware evidence from Linux configfs-tsm (Documentation/ABI/testing/configfs-tsm), which SEV-SNP and TDX guests
 * both expose: mkdir an entry under <tsm>/report, write the 64-byte report data to `inblob`, read `outblob` (SNP
 * report or TDX quote) and `auxblob` (SNP certificate table, if the host supplies one), check `provider`, and read
 * `generation` before and after: the kernel bumps it on every write, so anything but +1 means another writer
 * touched the entry and the blobs may not be ours. The entry is removed whatever happens.
 */
import { randomBytes } from 'node:crypto';
import * as nodeFs from 'node:fs/promises';
import { basename, join } from 'node:path';
import { toHex } from '../verify/evidence/byte-reader.ts';
import { readSnpReport } from '../verify/evidence/snp-report.ts';
import { readTdxQuote } from '../verify/evidence/tdx-quote.ts';
import type { AttestationProvider, RawEvidence } from './provider.ts';
import { SigilError } from '../protocol/sigil-error.ts';

export const DEFAULT_TSM_REPORT_PATH = '/sys/kernel/config/tsm/report';

export type HardwareTee = 'sev-snp' | 'tdx';

/** What `provider` reads for each TEE. */
export const TSM_PROVIDER_NAMES: Readonly<Record<HardwareTee, string>> = { 'sev-snp': 'sev_guest', tdx: 'tdx_guest' };

/** The file operations configfs-tsm needs; injectable because configfs semantics cannot be had on a normal filesystem. */
export interface TsmFs {
  mkdir(path: string): Promise<void>;
  rmdir(path: string): Promise<void>;
  readFile(path: string): Promise<Uint8Array>;
  writeFile(path: string, data: Uint8Array): Promise<void>;
  /** True when `path` exists and is a directory. */
  isDirectory(path: string): Promise<boolean>;
}

export const nodeTsmFs: TsmFs = {
  mkdir: async (path) => void (await nodeFs.mkdir(path)),
  rmdir: (path) => nodeFs.rmdir(path),
  readFile: async (path) => new Uint8Array(await nodeFs.readFile(path)),
  writeFile: (path, data) => nodeFs.writeFile(path, data),
  isDirectory: async (path) => {
    try {
      return (await nodeFs.stat(path)).isDirectory();
    } catch {
      return false;
    }
  },
};

export type TsmErrorCode = 'ERR_TSM_ABSENT' | 'ERR_TSM_PROVIDER' | 'ERR_TSM_CONFLICT' | 'ERR_TSM_REPORT_DATA' | 'ERR_TSM_IO';

export class TsmError extends SigilError<TsmErrorCode> {
  constructor(code: TsmErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, options);
  }
}

export interface ConfigfsTsmOptions {
  /** The configfs-tsm directory: `/sys/kernel/config/tsm/report`, or its parent `/sys/kernel/config/tsm`. */
  tsmPath: string;
  /** Fail unless the machine's provider is this TEE. */
  expect?: HardwareTee;
  fs?: TsmFs;
  /** How many times to start over when another writer changed the entry under us. */
  maxAttempts?: number;
}

export function tsmReportDir(tsmPath: string): string {
  return basename(tsmPath) === 'report' ? tsmPath : join(tsmPath, 'report');
}

function teeOfProvider(name: string): HardwareTee | undefined {
  if (name === TSM_PROVIDER_NAMES['sev-snp']) return 'sev-snp';
  if (name === TSM_PROVIDER_NAMES.tdx) return 'tdx';
  return undefined;
}

const text = (bytes: Uint8Array) => Buffer.from(bytes).toString('utf8').trim();

function isMissing(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | undefined)?.code === 'ENOENT';
}

/** Runs `body` inside a fresh report entry and removes the entry afterwards, even when `body` throws. */
async function withEntry<T>(fs: TsmFs, reportDir: string, body: (entry: string) => Promise<T>): Promise<T> {
  const entry = join(reportDir, `sigil-${process.pid}-${randomBytes(6).toString('hex')}`);
  try {
    await fs.mkdir(entry);
  } catch (err) {
    throw new TsmError('ERR_TSM_IO', `cannot create a configfs-tsm report entry at ${entry}: ${(err as Error).message}`, { cause: err });
  }
  try {
    return await body(entry);
  } finally {
    await fs.rmdir(entry).catch(() => undefined);
  }
}

/** Which TEE the configfs-tsm at `tsmPath` reports, or undefined when there is no configfs-tsm there. */
export async function probeConfigfsTsm(tsmPath: string, fs: TsmFs = nodeTsmFs): Promise<{ tee: HardwareTee | undefined; provider: string } | undefined> {
  const reportDir = tsmReportDir(tsmPath);
  if (!(await fs.isDirectory(reportDir))) return undefined;
  const provider = await withEntry(fs, reportDir, async (entry) => text(await fs.readFile(join(entry, 'provider'))));
  return { tee: teeOfProvider(provider), provider };
}

function measurementOf(tee: HardwareTee, outblob: Uint8Array): { measurement: string; reportData: Uint8Array } {
  if (tee === 'sev-snp') {
    const report = readSnpReport(outblob);
    return { measurement: toHex(report.measurement), reportData: report.reportData };
  }
  const quote = readTdxQuote(outblob);
  return { measurement: toHex(quote.body.mrTd), reportData: quote.body.reportData };
}

export async function createConfigfsTsmProvider(opts: ConfigfsTsmOptions): Promise<AttestationProvider> {
  const fs = opts.fs ?? nodeTsmFs;
  const reportDir = tsmReportDir(opts.tsmPath);
  const maxAttempts = opts.maxAttempts ?? 5;
  const wanted = opts.expect === undefined ? 'a TEE' : `${opts.expect} (${TSM_PROVIDER_NAMES[opts.expect]})`;
  const probe = await probeConfigfsTsm(opts.tsmPath, fs);
  if (probe === undefined) {
    throw new TsmError(
      'ERR_TSM_ABSENT',
      `attestation provider ${opts.expect ?? 'configfs-tsm'}: no configfs-tsm at ${reportDir} (is this a confidential VM with configfs mounted and the ${opts.expect === 'tdx' ? 'tdx_guest' : 'sev_guest or tdx_guest'} driver loaded?)`,
    );
  }
  const probed = probe.tee;
  if (probed === undefined || (opts.expect !== undefined && probed !== opts.expect)) {
    throw new TsmError(
      'ERR_TSM_PROVIDER',
      `attestation provider ${opts.expect ?? 'configfs-tsm'}: ${reportDir} is served by "${probe.provider}", not ${wanted}`,
    );
  }
  const tee: HardwareTee = probed;

  async function attempt(reportData: Uint8Array): Promise<RawEvidence | undefined> {
    return withEntry(fs, reportDir, async (entry) => {
      const generation = async () => Number.parseInt(text(await fs.readFile(join(entry, 'generation'))), 10);
      const before = await generation();
      await fs.writeFile(join(entry, 'inblob'), reportData);
      const outblob = await fs.readFile(join(entry, 'outblob'));
      let auxblob: Uint8Array = new Uint8Array(0);
      try {
        auxblob = await fs.readFile(join(entry, 'auxblob'));
      } catch (err) {
        if (!isMissing(err)) throw err;
      }
      const provider = text(await fs.readFile(join(entry, 'provider')));
      const after = await generation();
      if (after !== before + 1 || teeOfProvider(provider) !== tee) return undefined;
      const read = measurementOf(tee, outblob);
      if (!Buffer.from(read.reportData).equals(Buffer.from(reportData))) {
        throw new TsmError('ERR_TSM_REPORT_DATA', `the evidence from ${entry} does not carry the report data written to inblob`);
      }
      return { tee: tee, measurement: read.measurement, outblob, auxblob, reportData: Uint8Array.from(reportData) };
    });
  }

  return {
    tee,
    async collect(reportData: Uint8Array): Promise<RawEvidence> {
      if (reportData.length !== 64) throw new RangeError(`report data must be 64 bytes, got ${reportData.length}`);
      for (let i = 0; i < maxAttempts; i++) {
        const evidence = await attempt(reportData);
        if (evidence !== undefined) return evidence;
      }
      throw new TsmError(
        'ERR_TSM_CONFLICT',
        `configfs-tsm generation changed under us ${maxAttempts} times in a row at ${reportDir}: another writer is using the same entries`,
      );
    },
  };
}
