import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { stringify } from 'yaml';
import { addKey } from '../../src/auth/keys-file.ts';
import { catalogueEntry } from './sigil.ts';
import { SIGIL_FROM_SOURCES } from './cli.ts';

export interface SigilProcess {
  child: ChildProcess;
  url: string;
  dir: string;
  key: string;
  /** Every JSON log line the process wrote to stdout so far. */
  logs: Array<Record<string, unknown>>;
  /** Every line the process (and its workers) wrote to stderr so far; each is also passed on to this process's stderr. */
  stderr: string[];
  exited: Promise<number | null>;
  /** The process's resident memory now and at its peak, in bytes (/proc/PID/status VmRSS and VmHWM). */
  memory(): { rss: number; peak: number };
}

/** `sigil serve` as its own process, as an operator runs it, with one model `m` on `engineBaseUrl`; one process unless `config` sets `workers`. */
export async function startSigilProcess(engineBaseUrl: string, config: Record<string, unknown> = {}): Promise<SigilProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'sigil-process-'));
  writeFileSync(join(dir, 'models.yaml'), stringify({ models: [catalogueEntry({ id: 'm' }, 0)] }));
  writeFileSync(
    join(dir, 'sigil.yaml'),
    stringify({
      listen: { host: '127.0.0.1', port: 0 },
      upstreams: { e: { url: engineBaseUrl } },
      catalogue: 'models.yaml',
      auth: { keys_file: 'keys' },
      workers: 1,
      ...config,
    }),
  );
  const { key } = addKey(join(dir, 'keys'));
  const child = spawn(process.execPath, [...SIGIL_FROM_SOURCES, 'serve', '--config', join(dir, 'sigil.yaml')], { stdio: ['ignore', 'pipe', 'pipe'] });
  const stderr: string[] = [];
  child.stderr!.on('data', (chunk: Buffer) => process.stderr.write(chunk));
  createInterface({ input: child.stderr! }).on('line', (line) => stderr.push(line));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const logs: Array<Record<string, unknown>> = [];
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      // A process that missed its start must not outlive the test (with workers, SIGTERM reaches them through the primary).
      child.kill('SIGTERM');
      reject(new Error('sigil did not start'));
    }, 60_000);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const entry = JSON.parse(line) as Record<string, unknown>;
      logs.push(entry);
      if (entry.msg === 'sigil listening') {
        clearTimeout(timer);
        resolve(entry.url as string);
      }
    });
    void exited.then(() => reject(new Error('sigil exited before listening')));
  });
  const memory = () => {
    const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
    const kib = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)![1]) * 1024;
    return { rss: kib('VmRSS'), peak: kib('VmHWM') };
  };
  return { child, url, dir, key, logs, stderr, exited, memory };
}

/** The primary's worker processes: its children running its own command line (not, say, the esbuild service tsx starts). */
export function workerPids(pid: number): number[] {
  const out: number[] = [];
  let command: string;
  try {
    command = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return out; // the primary has exited
  }
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid && readFileSync(`/proc/${entry}/cmdline`, 'utf8') === command)
        out.push(Number(entry));
    } catch {
      // ended while we looked
    }
  }
  return out;
}
