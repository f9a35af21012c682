/**
 * The whole stack on every core: token events per second through Sigil with TLS ended in Sigil, EHBP
 * (every request sealed, every event a sealed frame) and a receipt on every stream, with `workers` set to
 * the cores Sigil gets. The fake engine runs without pauses between events (so Sigil is the limit) in as
 * many processes as it needs; load comes from separate processes. Nothing is pinned: on a machine with
 * few cores, engine, load and Sigil share them, so the figure is a floor. Run it on the machine the
 * figure is for, and record it in bench/README.md with its date and machine.
 *
 *   npm run build && npx tsx bench/scale.ts [--seconds 10] [--streams 64] [--tokens 128]
 *       [--workers N] [--engines N] [--loaders N] [--plain] [--no-tls] [--no-ehbp] [--no-receipts]
 *
 * Defaults on C cores: engines ⌈C/8⌉, loaders ⌈C/4⌉, Sigil's workers the rest (at least 1); 64 streams
 * per worker. `--plain` is `--no-tls --no-ehbp --no-receipts`.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { makeCredentials } from './credentials.ts';
import { ROOT, writeSigilConfig } from './peers.ts';
import { childPids, cpuMicros, freePort, killAllStarted, runBenchmark, spawnLogged, stopChild, waitForPort } from './processes.ts';
import type { ScaleJob, ScaleResult } from './scale-load.ts';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    streams: { type: 'string' },
    tokens: { type: 'string', default: '128' },
    workers: { type: 'string' },
    engines: { type: 'string' },
    loaders: { type: 'string' },
    plain: { type: 'boolean', default: false },
    'no-tls': { type: 'boolean', default: false },
    'no-ehbp': { type: 'boolean', default: false },
    'no-receipts': { type: 'boolean', default: false },
  },
});
const cores = availableParallelism();
const engines = Number(values.engines ?? Math.ceil(cores / 8));
const loaders = Number(values.loaders ?? Math.ceil(cores / 4));
const workers = Number(values.workers ?? Math.max(1, cores - engines - loaders));
const streams = Number(values.streams ?? 64 * workers);
const tokens = Number(values.tokens);
const seconds = Number(values.seconds);
const tls = !values.plain && !values['no-tls'];
const ehbp = !values.plain && !values['no-ehbp'];
const receipts = !values.plain && !values['no-receipts'];

const log = (msg: string) => process.stderr.write(`[bench-scale ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

async function main(): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'sigil-bench-scale-'));
  const started: ChildProcess[] = [];
  try {
    const enginePort = await freePort();
    const engine = spawnLogged(
      process.execPath,
      ['--import', 'tsx', join(ROOT, 'bench', 'fake-engine.ts'), '--port', String(enginePort), '--chunk-ms', '0', '--processes', String(engines)],
      join(dir, 'engine.log'),
    );
    await waitForPort(enginePort, 30_000, engine.child);

    const port = await freePort();
    const creds = tls ? makeCredentials(dir) : undefined;
    const { config, key } = writeSigilConfig(join(dir, 'sigil'), enginePort, port, 'warn', {
      workers,
      limits: { max_concurrent: 65_536, max_concurrent_per_key: 65_536 },
      ...(creds === undefined ? {} : { tls: { mode: 'files', cert_file: creds.certFile, key_file: creds.keyFile } }),
      ...(ehbp ? {} : { ehbp: { enabled: false } }),
    });
    const sigil = spawnLogged(process.execPath, [join(ROOT, 'bin', 'sigil.js'), 'serve', '--config', config], join(dir, 'sigil.log'), { cwd: ROOT });
    await waitForPort(port, 60_000, sigil.child);
    // The port answers once the first worker listens; the others join within moments.
    await new Promise((r) => setTimeout(r, 2000 + 200 * workers));
    const sigilPids = () => [sigil.pid, ...childPids(sigil.pid)];

    const base = `${tls ? 'https' : 'http'}://127.0.0.1:${port}`;
    const perLoader = Math.max(1, Math.round(streams / loaders));
    const job = (durationMs: number): ScaleJob => ({
      base,
      ...(creds === undefined ? {} : { ca: creds.certPem }),
      key,
      ehbp,
      receipts,
      concurrency: perLoader,
      durationMs,
      tokens,
    });
    const children = Array.from({ length: loaders }, () => fork(join(ROOT, 'bench', 'scale-load.ts'), [], { execArgv: ['--import', 'tsx'] }));
    started.push(...children);
    const load = (durationMs: number) =>
      Promise.all(
        children.map(
          (child) =>
            new Promise<ScaleResult>((resolve, reject) => {
              child.once('message', (m: { result?: ScaleResult; message?: string }) => (m.result ? resolve(m.result) : reject(new Error(m.message))));
              child.send(job(durationMs));
            }),
        ),
      );

    log(`warming up (${loaders} load processes, ${perLoader} streams each)`);
    await load(2000);
    const load0 = loadavg()[0]!;
    const cpuBefore = cpuMicros(sigilPids());
    const results = await load(seconds * 1000);
    const cpu = cpuMicros(sigilPids()) - cpuBefore;
    const events = results.reduce((n, r) => n + r.events, 0);
    const span = Math.max(...results.map((r) => r.seconds));
    const ok = results.reduce((n, r) => n + r.streamsOk, 0);
    const bad = results.reduce((n, r) => n + r.streamsBad, 0);
    const problem = results.find((r) => r.firstProblem !== undefined)?.firstProblem;

    const path = [tls ? 'TLS in Sigil' : 'plain HTTP', ehbp ? 'EHBP' : 'clear bodies', receipts ? 'a receipt on every stream' : 'no receipts'].join(', ');
    console.log(
      `${new Date().toISOString()}; ${cores} cores (${cpus()[0]?.model.trim() ?? 'unknown CPU'}); Node ${process.version}; load average ${load0.toFixed(1)} at the start`,
    );
    console.log(
      `Sigil workers ${workers}, engine processes ${engines}, load processes ${loaders}; ${perLoader * loaders} concurrent streams of ${tokens} token events; ${path}; ${seconds} s\n`,
    );
    console.log('| token events/s through Sigil | Sigil CPU µs per event (all its processes) | streams whole / bad | first stream opened whole |');
    console.log('|---|---|---|---|');
    console.log(
      `| ${Math.round(events / span).toLocaleString('en-US')} | ${(cpu / Math.max(1, events)).toFixed(1)} | ${ok} / ${bad} | ${results[0]!.sample} |`,
    );
    if (problem !== undefined) console.log(`\nfirst problem: ${problem}`);
    for (const child of children) child.kill();
    await stopChild(sigil.child, 'SIGTERM', 40_000);
    await stopChild(engine.child);
    return bad === 0 ? 0 : 1;
  } finally {
    for (const child of started) child.kill();
    killAllStarted();
    rmSync(dir, { recursive: true, force: true });
  }
}

runBenchmark(main, log);
