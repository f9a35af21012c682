/**
 * What `workers` buys: streamed token events per second through Sigil with `workers: 2` against
 * `workers: 1`, in interleaved rounds against one fast fake engine (no pause between events, so Sigil is
 * the limit). Nothing is pinned: the workers are meant to use every core, and on a 2-core machine the
 * engine and the load generator share those cores with them, so the ratio is a floor.
 *
 *   npm run build && npx tsx bench/workers.ts [--rounds 3] [--seconds 5] [--workers 2]
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { LoadResult, Target } from './load-client.ts';
import { ROOT, startEngine, writeSigilConfig } from './peers.ts';
import { childPids, cpuMicros, freePort, killAllStarted, spawnLogged, stopChild, waitForPort, type Spawned } from './processes.ts';
import { spread } from './stats.ts';

const { values } = parseArgs({
  options: { rounds: { type: 'string', default: '3' }, seconds: { type: 'string', default: '5' }, workers: { type: 'string', default: '2' } },
});
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const TOKENS = 64;
const CONCURRENCY = 64;

const dir = mkdtempSync(join(tmpdir(), 'sigil-bench-workers-'));
const engine = await startEngine(dir, 0, 0);
const loader = fork(join(ROOT, 'bench', 'load-client.ts'), [], { execArgv: ['--import', 'tsx'] });
const body = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'hello' }], max_tokens: TOKENS, stream: true });

async function startSigil(workers: number): Promise<{ spawned: Spawned; target: Target }> {
  const port = await freePort();
  const { config, key } = writeSigilConfig(join(dir, `workers-${workers}`), engine.port, port, 'warn', { workers });
  const spawned = spawnLogged(process.execPath, [join(ROOT, 'bin', 'sigil.js'), 'serve', '--config', config], join(dir, `workers-${workers}.log`), {
    cwd: ROOT,
  });
  await waitForPort(port, 60_000, spawned.child);
  // The port answers once the first worker listens; give the others a moment to join.
  await new Promise((r) => setTimeout(r, 3000));
  return {
    spawned,
    target: { host: '127.0.0.1', port, path: '/v1/chat/completions', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` } },
  };
}

const load = (target: Target, s: number) =>
  new Promise<LoadResult>((resolve, reject) => {
    loader.once('message', (m: { result?: LoadResult; message?: string }) => (m.result ? resolve(m.result) : reject(new Error(m.message))));
    loader.send({ kind: 'load', mode: 'stream', target, body, concurrency: CONCURRENCY, durationMs: s * 1000, tokens: TOKENS });
  });

const sides: Array<{ workers: number; sigil: Awaited<ReturnType<typeof startSigil>> }> = [];
try {
  for (const workers of [1, Number(values.workers)]) sides.push({ workers, sigil: await startSigil(workers) });
  for (const side of sides) await load(side.sigil.target, 2);
  const rates = new Map<number, number[]>();
  const cpu = new Map<number, number[]>();
  const bad = new Map<number, number>();
  const ratios: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const perSecond = new Map<number, number>();
    for (const side of r % 2 === 0 ? sides : [...sides].reverse()) {
      const pids = [side.sigil.spawned.pid, ...childPids(side.sigil.spawned.pid)];
      const before = cpuMicros(pids);
      const result = await load(side.sigil.target, seconds);
      const events = result.requests * TOKENS;
      perSecond.set(side.workers, events / result.seconds);
      rates.set(side.workers, [...(rates.get(side.workers) ?? []), events / result.seconds]);
      cpu.set(side.workers, [...(cpu.get(side.workers) ?? []), (cpuMicros(pids) - before) / events]);
      bad.set(side.workers, (bad.get(side.workers) ?? 0) + (result.streamsBad ?? 0) + result.errors);
    }
    ratios.push(perSecond.get(sides[1]!.workers)! / perSecond.get(1)!);
    process.stderr.write(`round ${r + 1}/${rounds}\n`);
  }
  const fmt = (xs: number[], d: number) => {
    const s = spread(xs);
    return `${s.median.toFixed(d)} (${s.min.toFixed(d)}–${s.max.toFixed(d)})`;
  };
  console.log(
    `${availableParallelism()} cores; ${rounds} interleaved rounds of ${seconds} s; ${CONCURRENCY} concurrent streams of ${TOKENS} token events; engine without pauses; nothing pinned.\n`,
  );
  console.log('| workers | token events/s | Sigil CPU µs per event (all its processes) | streams bad or failed |');
  console.log('|---|---|---|---|');
  for (const side of sides)
    console.log(`| ${side.workers} | ${fmt(rates.get(side.workers)!, 0)} | ${fmt(cpu.get(side.workers)!, 1)} | ${bad.get(side.workers)} |`);
  console.log(`\nevents/s, workers ${sides[1]!.workers} / workers 1, per round: median ${fmt(ratios, 2)}`);
} finally {
  for (const side of sides) await stopChild(side.sigil.spawned.child, 'SIGTERM', 40_000);
  loader.kill();
  await stopChild(engine.spawned.child);
  killAllStarted();
  rmSync(dir, { recursive: true, force: true });
}
