/**
 * What `workers` buys: streamed token events per second through Sigil with `workers: 2` against
 * `workers: 1`, in interleaved rounds against one fast fake engine (no pause between events, so the
 * proxy is the limit). Beside Sigil, the minimal node:http proxy (bench/minimal-proxy.ts) runs as one
 * process and as a node:cluster of the same size, sharing nothing: what a second process does on this
 * machine by itself, whatever the proxy. CPU per event is counted over all of a proxy's processes, and
 * the primary's share is shown apart (its only work during a run is the workers' calls and connections).
 *
 * The engine is pinned to one core (bench/peers.ts); `--pin` pins the load generator to that core too, as
 * bench/ab.ts does, leaving the other core to the proxy alone with one process. `--chunk-ms N` paces the engine (N ms
 * between a stream's events): below saturation both sides carry the same events/s, and CPU per event compares the work
 * per event without the scheduler's share deciding it.
 *
 *   npm run build && npx tsx bench/workers.ts [--rounds 3] [--seconds 5] [--workers 2] [--pin] [--chunk-ms 0]
 */
import { fork } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { LoadResult, Target } from './load-client.ts';
import { LOAD_CORE, ROOT, startEngine, writeSigilConfig } from './peers.ts';
import { childPids, cpuMicros, freePort, killAllStarted, pin, spawnLogged, stopChild, waitForPort, type Spawned } from './processes.ts';
import { spread } from './stats.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '5' },
    workers: { type: 'string', default: '2' },
    pin: { type: 'boolean', default: false },
    'chunk-ms': { type: 'string', default: '0' },
  },
});
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const many = Number(values.workers);
const TOKENS = 64;
const CONCURRENCY = 64;

const dir = mkdtempSync(join(tmpdir(), 'sigil-bench-workers-'));
const chunkMs = Number(values['chunk-ms']);
const engine = await startEngine(dir, chunkMs, 0);
const loader = fork(join(ROOT, 'bench', 'load-client.ts'), [], { execArgv: ['--import', 'tsx'] });
if (values.pin) pin(loader.pid!, LOAD_CORE);
const body = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'hello' }], max_tokens: TOKENS, stream: true });

interface Side {
  proxy: 'sigil' | 'node-http';
  processes: number;
  spawned: Spawned;
  target: Target;
}

/** Waits until scrapes of the port (each on a fresh connection) named `count` different processes. */
async function untilServing(port: number, count: number, path: string, idsOf: (text: string) => string[]): Promise<void> {
  const seen = new Set<string>();
  const deadline = Date.now() + 120_000;
  while (seen.size < count) {
    if (Date.now() > deadline) throw new Error(`only ${seen.size} of ${count} processes answered on port ${port}`);
    const text = await fetch(`http://127.0.0.1:${port}${path}`, { headers: { connection: 'close' } }).then(
      (res) => res.text(),
      () => undefined,
    );
    for (const id of text === undefined ? [] : idsOf(text)) seen.add(id);
    if (seen.size < count) await new Promise((r) => setTimeout(r, 200));
  }
}

async function startSigil(workers: number): Promise<Side> {
  const port = await freePort();
  const { config, key } = writeSigilConfig(join(dir, `workers-${workers}`), engine.port, port, 'warn', { workers });
  const spawned = spawnLogged(process.execPath, [join(ROOT, 'bin', 'sigil.js'), 'serve', '--config', config], join(dir, `workers-${workers}.log`), {
    cwd: ROOT,
  });
  await waitForPort(port, 60_000, spawned.child);
  // With workers, one scrape names every worker that listens (the primary gathers them).
  await untilServing(port, workers, '/metrics', (text) =>
    workers === 1 ? ['one'] : [...text.matchAll(/^sigil_worker_info\{worker="(\d+)"\} 1$/gm)].map((m) => m[1]!),
  );
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${key}` };
  return { proxy: 'sigil', processes: workers, spawned, target: { host: '127.0.0.1', port, path: '/v1/chat/completions', headers } };
}

async function startNodeHttp(processes: number): Promise<Side> {
  const port = await freePort();
  const spawned = spawnLogged(
    process.execPath,
    [
      '--import',
      'tsx',
      join(ROOT, 'bench', 'minimal-proxy.ts'),
      '--port',
      String(port),
      '--upstream',
      `http://127.0.0.1:${engine.port}`,
      '--processes',
      String(processes),
    ],
    join(dir, `node-http-${processes}.log`),
    { cwd: ROOT },
  );
  // The proxy prints its port once every process listens.
  const deadline = Date.now() + 60_000;
  while (!readFileSync(spawned.log, 'utf8').includes('"port"')) {
    if (Date.now() > deadline || spawned.child.exitCode !== null) throw new Error(`node-http ×${processes} did not start (${spawned.log})`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    proxy: 'node-http',
    processes,
    spawned,
    target: { host: '127.0.0.1', port, path: '/v1/chat/completions', headers: { 'content-type': 'application/json' } },
  };
}

const load = (target: Target, s: number) =>
  new Promise<LoadResult>((resolve, reject) => {
    loader.once('message', (m: { result?: LoadResult; message?: string }) => (m.result ? resolve(m.result) : reject(new Error(m.message))));
    loader.send({ kind: 'load', mode: 'stream', target, body, concurrency: CONCURRENCY, durationMs: s * 1000, tokens: TOKENS });
  });

const name = (side: Side) => `${side.proxy} ×${side.processes}`;
const sides: Side[] = [];
const loadBefore = loadavg();
try {
  for (const processes of [1, many]) sides.push(await startNodeHttp(processes), await startSigil(processes));
  for (const side of sides) await load(side.target, 2);
  const rates = new Map<string, number[]>();
  const cpu = new Map<string, number[]>();
  const primaryCpu = new Map<string, number[]>();
  const bad = new Map<string, number>();
  const push = (m: Map<string, number[]>, k: string, v: number) => m.set(k, [...(m.get(k) ?? []), v]);
  const rateRatios = new Map<string, number[]>();
  const cpuRatios = new Map<string, number[]>();
  for (let r = 0; r < rounds; r++) {
    const round = new Map<string, { rate: number; cpu: number }>();
    for (const side of r % 2 === 0 ? sides : [...sides].reverse()) {
      const workers = side.processes > 1 ? childPids(side.spawned.pid) : [];
      const before = { all: cpuMicros([side.spawned.pid, ...workers]), primary: cpuMicros([side.spawned.pid]) };
      const result = await load(side.target, seconds);
      const events = result.requests * TOKENS;
      const perEvent = (cpuMicros([side.spawned.pid, ...workers]) - before.all) / events;
      round.set(name(side), { rate: events / result.seconds, cpu: perEvent });
      push(rates, name(side), events / result.seconds);
      push(cpu, name(side), perEvent);
      if (side.processes > 1) push(primaryCpu, name(side), (cpuMicros([side.spawned.pid]) - before.primary) / events);
      bad.set(name(side), (bad.get(name(side)) ?? 0) + (result.streamsBad ?? 0) + result.errors + result.non200);
    }
    for (const proxy of ['node-http', 'sigil']) {
      const one = round.get(`${proxy} ×1`)!;
      const more = round.get(`${proxy} ×${many}`)!;
      push(rateRatios, proxy, more.rate / one.rate);
      push(cpuRatios, proxy, more.cpu / one.cpu);
    }
    process.stderr.write(`round ${r + 1}/${rounds}\n`);
  }
  const fmt = (xs: number[] | undefined, d: number) => {
    if (xs === undefined) return '–';
    const s = spread(xs);
    return `${s.median.toFixed(d)} (${s.min.toFixed(d)}–${s.max.toFixed(d)})`;
  };
  const load1 = (l: number[]) => l.map((x) => x.toFixed(1)).join(' ');
  console.log(
    `${availableParallelism()} cores; ${rounds} interleaved rounds of ${seconds} s; ${CONCURRENCY} concurrent streams of ${TOKENS} token events; engine ${chunkMs === 0 ? 'without pauses' : `pausing ${chunkMs} ms between events`}, pinned to core ${LOAD_CORE}; ` +
      `load generator ${values.pin ? `pinned to core ${LOAD_CORE}` : 'not pinned'}; proxies not pinned. Load average before: ${load1(loadBefore)}, after: ${load1(loadavg())}.\n`,
  );
  console.log('| proxy × processes | token events/s | CPU µs per event (all its processes) | of which the primary | streams bad or failed |');
  console.log('|---|---|---|---|---|');
  for (const side of sides)
    console.log(
      `| ${name(side)} | ${fmt(rates.get(name(side)), 0)} | ${fmt(cpu.get(name(side)), 1)} | ${fmt(primaryCpu.get(name(side)), 1)} | ${bad.get(name(side))} |`,
    );
  console.log(`\n| ×${many} over ×1, per round | events/s | CPU per event |\n|---|---|---|`);
  for (const proxy of ['node-http', 'sigil']) console.log(`| ${proxy} | ${fmt(rateRatios.get(proxy), 2)} | ${fmt(cpuRatios.get(proxy), 2)} |`);
} finally {
  for (const side of sides) await stopChild(side.spawned.child, 'SIGTERM', 40_000);
  loader.kill();
  await stopChild(engine.spawned.child);
  killAllStarted();
  rmSync(dir, { recursive: true, force: true });
}
