/**
 * `npm run bench`: Sigil's cost as ratios, side by side with its peers in one run, on loopback.
 *
 *   npm run bench                 full run (~8 min on 2 cores): 5 interleaved repetitions + memory test
 *   npm run bench -- --quick      ~2 min: 2 shorter repetitions, memory test on Sigil only
 *   npm run bench -- --profile    Sigil under load with --cpu-prof; top self-time functions to bench/results/profile.md
 *   other flags: --reps N, --peers direct,node-http,nginx,go,go-ecdsa,portkey,sigil,sigil-receipts, --no-memory, --no-install
 *
 * Everything listens on 127.0.0.1, every load is bounded in time, and the run stops by itself.
 */
import { spawnSync } from 'node:child_process';
import { fork, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { HoldJob, LoadJob, LoadResult, Target, WorkerMessage } from './load-client.ts';
import {
  directPeer,
  LOAD_CORE,
  nginxVersion,
  goVersion,
  startGoProxy,
  portkeyEntry,
  ROOT,
  startEngine,
  startNginx,
  startNodeHttpProxy,
  startPortkey,
  startSigil,
  type Engine,
  type Peer,
  type PeerName,
} from './peers.ts';
import { describeMachine, sigilCommit } from './machine.ts';
import { cpuMicros, hasTaskset, killAllStarted, pin, rssMb, runBenchmark, stopChild } from './processes.ts';
import { renderProfile, topSelfTime } from './profile.ts';
import { measureReceiptCost } from './receipt-cost.ts';
import { buildReport, renderMarkdown, type MemorySample, type Sample, type Scenario, type Unavailable } from './report.ts';
import { saturate, wrkVersion } from './wrk.ts';

const ALL_PEERS: PeerName[] = ['direct', 'node-http', 'nginx', 'go', 'go-ecdsa', 'portkey', 'sigil', 'sigil-receipts'];
const SCENARIOS: Scenario[] = ['json-c1', 'stream-c1', 'json-c50', 'stream-c50'];
const RESULTS = join(ROOT, 'bench', 'results');

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    reps: { type: 'string' },
    peers: { type: 'string' },
    'no-memory': { type: 'boolean', default: false },
    'no-install': { type: 'boolean', default: false },
    'chunk-ms': { type: 'string', default: '5' },
  },
});

const quick = args.quick;
const plan = {
  reps: Number(args.reps ?? (quick ? 2 : 5)),
  jsonC1Ms: quick ? 1000 : 2000,
  streamC1Ms: quick ? 1200 : 2500,
  jsonC50S: quick ? 2 : 4,
  streamC50Ms: quick ? 1500 : 3000,
  warmupMs: 200,
  chunkMs: Number(args['chunk-ms']),
  jsonMs: 0,
  jsonTokens: 16,
  streamTokensC1: 2,
  streamTokensC50: 16,
  memoryStreams: 1000,
  // 1,000 streams at 20 tokens/s each (50 ms apart) for 5 s: 20,000 events/s, all open at once.
  memoryChunkMs: 50,
  memoryTokens: quick ? 60 : 100,
  // RSS is read 5 s after the streams closed and again later: V8's memory reducer gives pages back
  // only after some idle seconds (about 15 s in trials here).
  memorySettleMs: 5000,
  memoryLateMs: quick ? 12_000 : 20_000,
  receiptIterations: quick ? 1000 : 4000,
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = (msg: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

const body = (stream: boolean, tokens: number, chunkMs?: number) =>
  JSON.stringify({
    model: 'bench-model',
    messages: [{ role: 'user', content: 'Say hello in one short sentence, please.' }],
    max_tokens: tokens,
    ...(stream ? { stream: true } : {}),
    ...(chunkMs !== undefined ? { bench_chunk_ms: chunkMs } : {}),
  });

function ensureTools(): void {
  const missing = [wrkVersion() === undefined ? 'wrk' : '', nginxVersion() === undefined ? 'nginx' : '', goVersion() === undefined ? 'golang-go' : ''].filter(
    Boolean,
  );
  if (missing.length === 0 || args['no-install'] || process.getuid?.() !== 0) return;
  log(`installing ${missing.join(' ')} from Debian (apt-get)…`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () => spawnSync('apt-get', ['install', '-y', '-qq', ...missing], { stdio: 'ignore', timeout: 240_000, env }).status === 0;
  if (!install()) {
    spawnSync('apt-get', ['update', '-qq'], { stdio: 'ignore', timeout: 240_000, env });
    if (!install()) log(`could not install ${missing.join(' ')}; those peers are skipped`);
  }
}

class LoadWorker {
  readonly child: ChildProcess;
  constructor() {
    this.child = fork(join(ROOT, 'bench', 'load-client.ts'), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    if (this.child.pid !== undefined) pin(this.child.pid, LOAD_CORE);
  }

  run(job: LoadJob | HoldJob, onOpened?: (n: number) => void): Promise<LoadResult> {
    return new Promise((resolve, reject) => {
      const onMessage = (m: WorkerMessage) => {
        if (m.type === 'opened') onOpened?.(m.streams);
        else {
          this.child.off('message', onMessage);
          if (m.type === 'result') resolve(m.result);
          else reject(new Error(m.message));
        }
      };
      this.child.on('message', onMessage);
      this.child.send(job);
    });
  }

  load(target: Target, mode: 'json' | 'stream', concurrency: number, durationMs: number, tokens: number): Promise<LoadResult> {
    return this.run({ kind: 'load', mode, target, body: body(mode === 'stream', tokens), concurrency, durationMs, tokens });
  }

  stop(): Promise<void> {
    return stopChild(this.child);
  }
}

async function startPeer(name: PeerName, dir: string, engine: Engine, sigilNodeArgs: string[] = []): Promise<Peer> {
  switch (name) {
    case 'direct':
      return directPeer(engine);
    case 'node-http':
      return startNodeHttpProxy(dir, engine);
    case 'nginx':
      if (nginxVersion() === undefined) throw new Error('nginx is not installed (as root: apt-get install -y nginx)');
      return startNginx(dir, engine);
    case 'go':
    case 'go-ecdsa':
      if (goVersion() === undefined) throw new Error('go is not installed (as root: apt-get install -y golang-go)');
      return startGoProxy(dir, engine, name === 'go-ecdsa');
    case 'portkey':
      return startPortkey(dir, engine);
    case 'sigil':
      return startSigil(dir, engine, { receipts: false, nodeArgs: sigilNodeArgs });
    case 'sigil-receipts':
      return startSigil(dir, engine, { receipts: true, nodeArgs: sigilNodeArgs });
  }
}

/**
 * A JSON request must succeed before a peer is measured at all; a peer whose streams fail is measured
 * on JSON only, and the table says why.
 */
async function sanityCheck(worker: LoadWorker, peer: Peer): Promise<{ json?: string; stream?: string }> {
  const json = await worker.load(peer.target, 'json', 1, 300, plan.jsonTokens);
  if (json.requests === 0) return { json: `JSON requests failed (${json.firstProblem ?? 'no answer'})` };
  const stream = await worker.load(peer.target, 'stream', 1, 300, plan.streamTokensC1);
  if (stream.requests === 0) return { stream: `stream requests failed (${stream.firstProblem ?? 'no answer'})` };
  return {};
}

const PEER_NOTES: Partial<Record<PeerName, string>> = {
  portkey:
    'Portkey 1.15.2 answers every stream with 500 "Something went wrong" (TypeError: immutable in its updateHeaders with the @hono/node-server it installs, Portkey-AI/gateway#1389), so it is compared on JSON only.',
};

async function measure(worker: LoadWorker, dir: string, peer: Peer, scenario: Scenario, rep: number, useWrk: boolean): Promise<Sample> {
  const base = { rep, peer: peer.name, scenario };
  if (scenario === 'json-c50') {
    const before = cpuMicros(peer.pids());
    const r = await saturate(dir, peer.target, body(false, plan.jsonTokens), 50, plan.jsonC50S, LOAD_CORE, useWrk);
    const cpu = cpuMicros(peer.pids()) - before;
    return {
      ...base,
      requests: r.requests,
      errors: r.errors,
      p50: r.p50,
      p99: r.p99,
      rps: r.rps,
      tool: r.tool,
      cpuUsPerRequest: r.requests > 0 ? cpu / r.requests : Number.NaN,
    };
  }
  const stream = scenario.startsWith('stream');
  const concurrency = scenario.endsWith('c1') ? 1 : 50;
  const tokens = stream ? (concurrency === 1 ? plan.streamTokensC1 : plan.streamTokensC50) : plan.jsonTokens;
  const duration = scenario === 'json-c1' ? plan.jsonC1Ms : scenario === 'stream-c1' ? plan.streamC1Ms : plan.streamC50Ms;
  await worker.load(peer.target, stream ? 'stream' : 'json', concurrency, plan.warmupMs, tokens);
  const before = cpuMicros(peer.pids());
  const r = await worker.load(peer.target, stream ? 'stream' : 'json', concurrency, duration, tokens);
  const cpu = cpuMicros(peer.pids()) - before;
  const s: Sample = {
    ...base,
    requests: r.requests,
    errors: r.errors + r.non200,
    p50: r.latency.p50,
    p99: r.latency.p99,
    rps: r.rps,
    tool: 'node:http client',
  };
  if (r.requests > 0) s.cpuUsPerRequest = cpu / r.requests;
  if (stream) {
    s.gapP50 = r.gaps?.p50 ?? Number.NaN;
    s.gapP99 = r.gaps?.p99 ?? Number.NaN;
    s.streamsOk = r.streamsOk ?? 0;
    s.streamsBad = r.streamsBad ?? 0;
    s.mergedReads = r.mergedReads ?? 0;
    s.reads = r.reads ?? 0;
  }
  if (r.firstProblem !== undefined) s.problem = r.firstProblem;
  return s;
}

async function memoryTest(worker: LoadWorker, peer: Peer): Promise<MemorySample> {
  await sleep(1000);
  const pids = peer.pids();
  const baselineMb = rssMb(pids);
  let peakMb = baselineMb;
  let opened = 0;
  const sampler = setInterval(() => (peakMb = Math.max(peakMb, rssMb(pids))), 100);
  const result = await worker.run(
    { kind: 'hold', target: peer.target, body: body(true, plan.memoryTokens, plan.memoryChunkMs), streams: plan.memoryStreams, tokens: plan.memoryTokens },
    (n) => {
      opened = n;
      peakMb = Math.max(peakMb, rssMb(pids));
    },
  );
  clearInterval(sampler);
  await sleep(plan.memorySettleMs);
  const afterMb = rssMb(pids);
  await sleep(plan.memoryLateMs - plan.memorySettleMs);
  const sample: MemorySample = {
    peer: peer.name,
    streams: plan.memoryStreams,
    opened,
    streamsOk: result.streamsOk ?? 0,
    baselineMb,
    peakMb,
    afterMb,
    lateMb: rssMb(pids),
    lateS: plan.memoryLateMs / 1000,
  };
  if (result.firstProblem !== undefined) sample.problem = result.firstProblem;
  return sample;
}

function updateReadme(markdown: string): void {
  const file = join(ROOT, 'bench', 'README.md');
  if (!existsSync(file)) return;
  const text = readFileSync(file, 'utf8');
  const start = '<!-- bench:results:start -->';
  const end = '<!-- bench:results:end -->';
  const a = text.indexOf(start);
  const b = text.indexOf(end);
  if (a === -1 || b < a) return;
  writeFileSync(file, text.slice(0, a + start.length) + '\n' + markdown + text.slice(b));
}

async function runProfile(dir: string, engine: Engine, worker: LoadWorker): Promise<void> {
  const out: string[] = [
    '# Sigil CPU profile under load',
    '',
    `${new Date().toISOString()} on ${describeMachine()}; Sigil at ${sigilCommit()}.`,
    `Each profile is one Sigil process (\`node --cpu-prof\`, 100 µs sampling) pinned to one core: JSON under wrk at c=50 for 8 s, or streams at c=50 (16 tokens, ${plan.chunkMs} ms apart) for 6 s. Files: bench/results/profile-*.cpuprofile (not committed; open them in Chrome DevTools or speedscope).`,
    '',
  ];
  const useWrk = wrkVersion() !== undefined;
  const runs = [
    { name: 'sigil', label: 'Sigil, no receipts, JSON', load: 'json' },
    { name: 'sigil-receipts', label: 'Sigil, receipt on every request, JSON', load: 'json' },
    { name: 'sigil', label: 'Sigil, no receipts, streams', load: 'stream' },
  ] as const;
  for (const run of runs) {
    const profDir = join(dir, `prof-${run.name}-${run.load}`);
    const peer = await startPeer(run.name, dir, engine, ['--cpu-prof', '--cpu-prof-interval=100', `--cpu-prof-dir=${profDir}`]);
    log(`profiling ${run.label}…`);
    const units =
      run.load === 'json'
        ? (await saturate(dir, peer.target, body(false, plan.jsonTokens), 50, 8, LOAD_CORE, useWrk)).requests
        : (await worker.load(peer.target, 'stream', 50, 6000, plan.streamTokensC50)).requests;
    await peer.stop();
    const file = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'));
    if (file === undefined) throw new Error(`no profile written in ${profDir}`);
    copyFileSync(join(profDir, file), join(RESULTS, `profile-${run.name}-${run.load}.cpuprofile`));
    out.push(renderProfile(run.label, topSelfTime(join(profDir, file), ROOT, 30), units, run.load === 'json' ? 'request' : 'stream'));
  }
  writeFileSync(join(RESULTS, 'profile.md'), out.join('\n'));
  process.stdout.write(out.join('\n'));
}

async function main(): Promise<number> {
  const started = Date.now();
  const loadBefore = loadavg()[0]!;
  if (loadBefore > 1.5)
    log(`warning: load average ${loadBefore.toFixed(1)} on ${cpus().length} cores before the run; latency percentiles will carry other processes' noise`);
  const watchdog = setTimeout(
    () => {
      log('time limit reached: stopping everything');
      killAllStarted();
      process.exit(1);
    },
    (quick ? 6 : 20) * 60_000,
  );
  watchdog.unref();

  mkdirSync(RESULTS, { recursive: true });
  ensureTools();
  const useWrk = wrkVersion() !== undefined;
  const dir = mkdtempSync(join(tmpdir(), 'sigil-bench-'));
  const engine = await startEngine(dir, plan.chunkMs, plan.jsonMs);
  const worker = new LoadWorker();
  try {
    if (args.profile) {
      await runProfile(dir, engine, worker);
      return 0;
    }
    log('receipt cost, in-process…');
    const receiptCost = await measureReceiptCost(plan.receiptIterations);

    const wanted = args.peers === undefined ? ALL_PEERS : (args.peers.split(',') as PeerName[]).filter((p) => ALL_PEERS.includes(p));
    if (!wanted.includes('direct')) wanted.unshift('direct');
    const live: Peer[] = [];
    const unavailable: Unavailable[] = [];
    const jsonOnly = new Set<PeerName>();
    for (const name of wanted) {
      try {
        const peer = await startPeer(name, dir, engine);
        const problem = await sanityCheck(worker, peer);
        if (problem.json !== undefined) {
          await peer.stop();
          throw new Error(problem.json);
        }
        if (problem.stream !== undefined) {
          jsonOnly.add(name);
          unavailable.push({ name, note: `streams not measured: ${problem.stream}. ${PEER_NOTES[name] ?? ''}`.trim() });
          log(`${name}: JSON only (${problem.stream})`);
        }
        live.push(peer);
        log(`${name}: ready`);
      } catch (err) {
        unavailable.push({ name, note: (err as Error).message });
        log(`${name}: skipped (${(err as Error).message})`);
      }
    }
    if (!live.some((p) => p.name === 'direct')) throw new Error('the fake engine does not answer');

    log('warm-up…');
    for (const peer of live) {
      await saturate(dir, peer.target, body(false, plan.jsonTokens), 50, 1, LOAD_CORE, useWrk);
      if (!jsonOnly.has(peer.name)) await worker.load(peer.target, 'stream', 20, quick ? 500 : 1000, plan.streamTokensC50);
    }

    const samples: Sample[] = [];
    for (let rep = 1; rep <= plan.reps; rep++) {
      const order = live.map((_, i) => live[(i + rep - 1) % live.length]!);
      log(`repetition ${rep}/${plan.reps}: ${order.map((p) => p.name).join(', ')}`);
      for (const scenario of SCENARIOS) {
        for (const peer of order) {
          if (scenario.startsWith('stream') && jsonOnly.has(peer.name)) continue;
          samples.push(await measure(worker, dir, peer, scenario, rep, useWrk));
        }
      }
    }

    const memory: MemorySample[] = [];
    if (!args['no-memory']) {
      const memoryPeers = live.filter((p) => p.name !== 'direct' && !jsonOnly.has(p.name) && (!quick || p.name.startsWith('sigil')));
      for (const peer of memoryPeers) {
        log(`memory: ${plan.memoryStreams} concurrent streams through ${peer.name}…`);
        memory.push(await memoryTest(worker, peer));
      }
    }

    for (const peer of live) await peer.stop();

    const tools: Record<string, string> = {};
    const nv = nginxVersion();
    if (nv) tools.nginx = nv;
    const wv = wrkVersion();
    if (wv) tools.wrk = wv;
    const pk = portkeyEntry();
    if (pk) tools['@portkey-ai/gateway'] = pk.version;
    tools.autocannon = (JSON.parse(readFileSync(join(ROOT, 'node_modules', 'autocannon', 'package.json'), 'utf8')) as { version: string }).version;
    const report = buildReport(
      {
        date: new Date().toISOString().slice(0, 16).replace('T', ' ') + ' UTC',
        mode: quick ? '--quick' : 'full',
        reps: plan.reps,
        machine: describeMachine(),
        node: process.version,
        tools,
        commit: sigilCommit(),
        engine: {
          chunkMs: plan.chunkMs,
          jsonMs: plan.jsonMs,
          streamTokensC1: plan.streamTokensC1,
          streamTokensC50: plan.streamTokensC50,
          jsonTokens: plan.jsonTokens,
        },
        durations: { jsonC1Ms: plan.jsonC1Ms, streamC1Ms: plan.streamC1Ms, jsonC50S: plan.jsonC50S * 1000, streamC50Ms: plan.streamC50Ms },
        pinning: hasTaskset ? `Proxies pinned to core 0; engine and load generators to core 1 (taskset).` : 'No CPU pinning (taskset missing).',
        loadGenerators: `${useWrk ? 'wrk (JSON c=50, saturation)' : 'autocannon (JSON c=50, saturation)'}; a node:http client in its own process for c=1 JSON and all streams`,
        seconds: Math.round((Date.now() - started) / 1000),
        loadAverage: { before: loadBefore, after: loadavg()[0]! },
      },
      live.map((p) => p.name),
      unavailable,
      samples,
      memory,
      receiptCost,
    );
    const markdown = renderMarkdown(report);
    const stem = quick ? 'quick' : 'latest';
    writeFileSync(join(RESULTS, `${stem}.json`), JSON.stringify(report, null, 2) + '\n');
    writeFileSync(join(RESULTS, `${stem}.md`), markdown);
    if (!quick && args.reps === undefined && args.peers === undefined) updateReadme(markdown);
    process.stdout.write(markdown);
    log(`done in ${Math.round((Date.now() - started) / 1000)} s; wrote bench/results/${stem}.md and .json`);
    return 0;
  } finally {
    await worker.stop();
    await stopChild(engine.spawned.child);
    rmSync(dir, { recursive: true, force: true });
  }
}

runBenchmark(main, log);
