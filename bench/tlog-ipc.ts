/**
 * What a worker's append to the primary's transparency log costs over the IPC channel (docs/log.md#with-workers,
 * bench/README.md "Transparency log"): a real primary (node:cluster, advanced serialization, the sequencer in a
 * temporary folder) and one worker appending 1 KiB receipts through the same PrimaryChannel and PrimaryLog Sigil uses.
 *
 *   npx tsx bench/tlog-ipc.ts [--appends 20000] [--per-turn 1,8,64]
 *
 * For each number of appends made in one turn of the worker's event loop (1: each travels alone, one IPC message a
 * request; more: they share a message, as requests finishing together do under load): the median round trip one
 * turn waits for, and the CPU per append of the worker and of the primary (process.cpuUsage).
 */
import cluster from 'node:cluster';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createLogger } from '../src/logger/logger.ts';
import { TransparencyLog } from '../src/tlog/transparency-log.ts';
import { answerWorker, PrimaryChannel, PrimaryLog, type SharedState } from '../src/workers/shared-state.ts';

const { values } = parseArgs({ options: { appends: { type: 'string', default: '20000' }, 'per-turn': { type: 'string', default: '1,8,64' } } });
const appends = Number(values.appends);
const perTurn = values['per-turn'].split(',').map(Number);

type Phase = { type: 'bench:phase'; perTurn: number; end: boolean; roundTripUs?: number; workerUs?: number };

const cpuUs = () => {
  const { user, system } = process.cpuUsage();
  return user + system;
};

if (cluster.isPrimary) {
  const dir = mkdtempSync(join(tmpdir(), 'sigil-tlog-ipc-'));
  const log = await TransparencyLog.open({ dir, originPrefix: 'bench', batchMs: 1000, idsKept: 100_000, logger: createLogger('warn') });
  log.start();
  cluster.setupPrimary({ serialization: 'advanced' });
  const worker = cluster.fork();
  // Only the log is asked for here; the limits, receipts and replays of a real primary are not used.
  answerWorker(worker, { log } as unknown as SharedState);
  let started = 0;
  const rows: string[] = ['| appends per turn | round trip, median µs | worker CPU µs/append | primary CPU µs/append |', '|---|---|---|---|'];
  worker.on('message', (m: Phase) => {
    if (m?.type !== 'bench:phase') return;
    if (!m.end) {
      started = cpuUs();
      return;
    }
    // What is still pending is integrated now, so each row's primary CPU includes integrating all its appends.
    void log.integrate().then(() => {
      const primaryUs = (cpuUs() - started) / appends;
      rows.push(`| ${m.perTurn} | ${m.roundTripUs!.toFixed(1)} | ${m.workerUs!.toFixed(2)} | ${primaryUs.toFixed(2)} |`);
      if (m.perTurn !== perTurn.at(-1)) {
        worker.send({ type: 'bench:next' });
        return;
      }
      worker.kill();
      void log.close().then(() => {
        rmSync(dir, { recursive: true, force: true });
        process.stdout.write(`${appends} appends per row (the primary's CPU includes integrating them, one batch a second)\n${rows.join('\n')}\n`);
      });
    });
  });
} else {
  const served = new PrimaryLog(new PrimaryChannel());
  const receipt = 'x'.repeat(1024);
  const send = (m: Phase) => new Promise<void>((resolve) => process.send!(m, undefined, {}, () => resolve()));
  let n = 0;
  for (const k of perTurn) {
    // Warm up, then measure.
    for (let i = 0; i < 200; i++) await served.append(`${receipt}${n++}`, `warm-${n}`);
    await send({ type: 'bench:phase', perTurn: k, end: false });
    const waits: number[] = [];
    const before = cpuUs();
    for (let done = 0; done < appends; done += k) {
      const t = performance.now();
      await Promise.all(Array.from({ length: Math.min(k, appends - done) }, () => served.append(`${receipt}${n++}`, `id-${n}`)));
      waits.push((performance.now() - t) * 1000);
    }
    const workerUs = (cpuUs() - before) / appends;
    waits.sort((a, b) => a - b);
    // The next row starts once the primary has counted this one.
    const next = new Promise<void>((resolve) => {
      const onNext = (m: { type?: string }) => {
        if (m?.type !== 'bench:next') return;
        process.off('message', onNext);
        resolve();
      };
      process.on('message', onNext);
    });
    await send({ type: 'bench:phase', perTurn: k, end: true, roundTripUs: waits[Math.floor(waits.length / 2)]!, workerUs });
    await next;
  }
}
