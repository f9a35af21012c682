/**
 * What waiting for a receipt's entry to be on disk costs (docs/log.md#faults, bench/README.md "Transparency log:
 * durable receipts"), in-process:
 *
 *   npx tsx bench/tlog-durable.ts [--seconds 5] [--concurrency 1,10,40,200] [--dir /var/tmp]
 *
 * For each concurrency, that many simulated requests loop: append a receipt's entry, wait until it is durable
 * (TransparencyLog.whenDurable: its entry bundle written and fdatasync'd, group-committed with the others waiting),
 * then the next. Reports entries per second and the added latency per receipt (append to durable: median, p99).
 * The sequencer still signs one checkpoint every `batch_ms` (1000 ms) as in production.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createLogger } from '../src/logger/logger.ts';
import { TransparencyLog } from '../src/tlog/transparency-log.ts';

const { values } = parseArgs({
  options: { seconds: { type: 'string', default: '5' }, concurrency: { type: 'string', default: '1,10,40,200' }, dir: { type: 'string', default: tmpdir() } },
});
const seconds = Number(values.seconds);
const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

for (const concurrency of values.concurrency.split(',').map(Number)) {
  const dir = mkdtempSync(join(values.dir, 'sigil-tlog-durable-'));
  const log = await TransparencyLog.open({ dir, originPrefix: 'bench.example', batchMs: 1000, idsKept: 1000, logger: createLogger('warn') });
  log.start();
  const latencies: number[] = [];
  const end = performance.now() + seconds * 1000;
  const receipt = randomBytes(700).toString('base64url');
  const cpu = process.cpuUsage();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      for (let i = 0; performance.now() < end; i++) {
        const started = performance.now();
        await log.whenDurable(log.append(`${receipt}.${worker}.${i}`));
        latencies.push(performance.now() - started);
      }
    }),
  );
  const used = process.cpuUsage(cpu);
  await log.close();
  rmSync(dir, { recursive: true });
  latencies.sort((a, b) => a - b);
  console.log(
    JSON.stringify({
      concurrency,
      entries_per_s: Math.round(latencies.length / seconds),
      added_ms_median: +quantile(latencies, 0.5).toFixed(2),
      added_ms_p99: +quantile(latencies, 0.99).toFixed(2),
      cpu_us_per_entry: +((used.user + used.system) / latencies.length).toFixed(1),
      load: (await import('node:os')).loadavg()[0]!.toFixed(1),
    }),
  );
}
