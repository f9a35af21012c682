/**
 * The transparency log's costs (docs/log.md, bench/README.md "Transparency log"), in-process:
 *
 *   npx tsx bench/tlog.ts [--entries 1000000] [--batch 1000]
 *
 * - append: µs of CPU a receipt request adds on its own path (SHA-256 of a 1 KiB compact JWS, a push, a
 *   receipt id remembered), by process.cpuUsage over every append;
 * - integrate: µs of CPU per entry the sequencer spends (leaf and node hashes, tiles written and synced, one
 *   Ed25519 checkpoint per batch), at `--batch` entries a batch;
 * - storage: bytes on disk for `--entries` entries (du of the folder);
 * - restart: the seconds a start spends checking that stored log;
 * - verify: the seconds `sigil log verify` (verifyWholeLog, over HTTP on loopback) takes for the whole log;
 * - proofs: µs per inclusion proof of a random leaf (its tiles mostly read back from the folder, checked: docs/log.md#memory);
 * - memory: the process's RSS, V8 heap and Buffer (arrayBuffers) bytes once `--entries` are appended, and again once
 *   the log is reopened and checked, after a full GC when run with --expose-gc (`node --expose-gc --import tsx bench/tlog.ts`).
 */
import { execSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createLogger } from '../src/logger/logger.ts';
import { TransparencyLog } from '../src/tlog/transparency-log.ts';
import { handleLog, servedLocally } from '../src/http/routes/transparency-log.ts';
import type { AppContext } from '../src/http/context.ts';
import { parseRequestTarget } from '../src/http/request-target.ts';
import { parseVerifierKey } from '../src/protocol/tlog/note.ts';
import { verifyWholeLog } from '../src/verify/tlog/log-client.ts';

const { values } = parseArgs({ options: { entries: { type: 'string', default: '1000000' }, batch: { type: 'string', default: '1000' } } });
const entries = Number(values.entries);
const batch = Number(values.batch);
const dir = mkdtempSync(join(tmpdir(), 'sigil-tlog-bench-'));
const logger = createLogger('warn');
const options = { dir, originPrefix: 'bench.example', batchMs: 1000, idsKept: 100_000, logger };
const megabytes = (n: number) => +(n / 1e6).toFixed(1);
/** The process's memory after a full collection when --expose-gc allows one. */
const memory = () => {
  (globalThis as { gc?: () => void }).gc?.();
  const m = process.memoryUsage();
  return { rss_mb: megabytes(m.rss), heap_used_mb: megabytes(m.heapUsed), array_buffers_mb: megabytes(m.arrayBuffers) };
};
const baseline = memory();
const cpu = (before: NodeJS.CpuUsage) => {
  const used = process.cpuUsage(before);
  return used.user + used.system;
};

// A receipt-sized JWS (about 1 KiB), different for every entry: the hot path hashes it.
const body = randomBytes(760).toString('base64url');
const receipts = Array.from({ length: 1024 }, (_, i) => `eyJhbGciOiJFUzI1NiJ9.${body}${i.toString(36)}.${randomBytes(64).toString('base64url')}`);

let log: TransparencyLog | undefined = await TransparencyLog.open(options);
let appendUs = 0;
let integrateUs = 0;
const started = performance.now();
for (let done = 0; done < entries;) {
  const n = Math.min(batch, entries - done);
  let before = process.cpuUsage();
  for (let i = 0; i < n; i++) log.append(receipts[(done + i) % receipts.length]! + done, `r${done + i}`);
  appendUs += cpu(before);
  before = process.cpuUsage();
  await log.integrate();
  integrateUs += cpu(before);
  done += n;
  if (done % 100_000 === 0) process.stderr.write(`tlog: ${done} entries (${((performance.now() - started) / 1000).toFixed(0)} s)\n`);
}
await log.close();
const appended = memory();
log = undefined; // the reopened log's figures are its own
const bytes = Number(
  execSync(`du -sb ${JSON.stringify(dir)}`)
    .toString()
    .split('\t')[0],
);
const files = Number(
  execSync(`find ${JSON.stringify(dir)} -type f | wc -l`)
    .toString()
    .trim(),
);

let t = performance.now();
const reopened = await TransparencyLog.open(options);
const restartS = (performance.now() - t) / 1000;
const restarted = memory();

// Inclusion proofs of random leaves: most tiles they need are out of memory and read back (8 KiB files, page cache).
const proofs = 2000;
t = performance.now();
for (let i = 0; i < proofs; i++) reopened.inclusion(Math.floor(Math.random() * entries));
const proofUs = ((performance.now() - t) * 1000) / proofs;

const ctx = { transparencyLog: servedLocally(reopened) } as unknown as AppContext;
const server = createServer((req, res) => {
  handleLog(req, res, ctx, parseRequestTarget(req.url ?? '/')).catch(() => res.writeHead(404).end());
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/log`;
t = performance.now();
const report = await verifyWholeLog({ url, origin: reopened.origin, key: parseVerifierKey(reopened.key.vkey) });
const verifyS = (performance.now() - t) / 1000;
server.close();
await reopened.close();
rmSync(dir, { recursive: true, force: true });

const result = {
  entries,
  batch,
  append_us_cpu_per_entry: +(appendUs / entries).toFixed(2),
  integrate_us_cpu_per_entry: +(integrateUs / entries).toFixed(2),
  storage_bytes: bytes,
  storage_bytes_per_entry: +(bytes / entries).toFixed(1),
  files,
  restart_check_s: +restartS.toFixed(1),
  verify_whole_log_s: +verifyS.toFixed(1),
  verified_entries: report.entries,
  random_inclusion_proof_us: +proofUs.toFixed(1),
  tiles_in_memory: reopened.tilesInMemory,
  gc: typeof (globalThis as { gc?: unknown }).gc === 'function',
  memory_before: baseline,
  memory_appended: appended,
  memory_reopened: restarted,
};
process.stdout.write(JSON.stringify(result, null, 2) + '\n');
