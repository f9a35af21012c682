/**
 * TLS benchmarks: what Sigil's own TLS costs, side by side in one run with
 * interleaved repetitions, against nginx terminating TLS and a bare node:https pass-through (the floor),
 * all in front of the same fake engine and all with the same P-256 key and self-signed certificate
 * (made with openssl for the run).
 *
 *   npx tsx bench/tls.ts            full run (~5 min on 2 cores): 5 repetitions; writes bench/results/tls-latest.md
 *                                   and the table in bench/README.md (section "TLS")
 *   npx tsx bench/tls.ts --quick    ~1.5 min: 2 shorter repetitions; bench/results/tls-quick.md
 *   other flags: --reps N, --peers node-https,nginx,sigil,sigil-receipts, --no-install
 *
 * Per peer and repetition: (a) full TLS handshakes per second (a new connection each, no resumption,
 * handshake only) and the proxy's CPU per handshake; (b) JSON requests per second on kept-alive HTTPS
 * connections (wrk, c=16) and the proxy's CPU per request; (c) streams (c=32, 64 token events each):
 * the proxy's CPU per token event, and that every event arrives, in order, none held back.
 * Sigil runs the compiled bin/sigil.js: `npm run build` first. Everything listens on 127.0.0.1, every
 * load is bounded in time, and the run stops by itself.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { TLS_1_2_CIPHERS, TLS_1_3_CIPHERSUITES } from '../src/tls/hardening.ts';
import type { LoadJob, LoadResult, Target, WorkerMessage } from './load-client.ts';
import { LOAD_CORE, nginxVersion, pinnedProcess, ROOT, startEngine, startNodeHttpProxy, writeSigilConfig, type Engine, type NamedPeer } from './peers.ts';
import { childPids, cpuMicros, freePort, hasTaskset, killAllStarted, rssMb, runBenchmark, spawnLogged, stopChild } from './processes.ts';
import { spread, type Spread } from './stats.ts';
import type { HandshakeJob, HandshakeMessage, HandshakeResult } from './tls-handshake.ts';
import { saturate, wrkVersion } from './wrk.ts';
import { makeCredentials, SERVERNAME, type Credentials } from './credentials.ts';
import { ForkedWorker } from './forked-worker.ts';
import { describeMachine, sigilCommit } from './machine.ts';

type TlsPeerName = 'node-https' | 'nginx' | 'sigil' | 'sigil-receipts' | 'node-http' | 'sigil-plain';
const ALL_PEERS: TlsPeerName[] = ['node-https', 'nginx', 'sigil', 'sigil-receipts', 'node-http', 'sigil-plain'];
const FLOOR: TlsPeerName = 'node-https';
/** Plain-HTTP references in the same run (JSON and streams only): what TLS itself adds, to the floor and to Sigil. */
const PLAIN_FLOOR: TlsPeerName = 'node-http';
const PLAIN = new Set<TlsPeerName>(['node-http', 'sigil-plain']);
/** Each TLS peer's plain-HTTP twin, for "added by TLS". */
const PLAIN_TWIN: Partial<Record<TlsPeerName, TlsPeerName>> = { 'node-https': 'node-http', sigil: 'sigil-plain' };
const LABELS: Record<TlsPeerName, string> = {
  'node-https': 'bare node:https proxy (floor)',
  nginx: 'nginx (TLS)',
  sigil: 'Sigil, TLS, no receipts',
  'sigil-receipts': 'Sigil, TLS, receipt on every request',
  'node-http': 'minimal node:http proxy (plain HTTP)',
  'sigil-plain': 'Sigil, plain HTTP, no receipts',
};
const RESULTS = join(ROOT, 'bench', 'results');
const CHAT_PATH = '/v1/chat/completions';
/** The issue's target: Sigil's CPU per request within this factor of the bare node:https floor. */
const TARGET_RATIO = 1.25;

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    reps: { type: 'string' },
    peers: { type: 'string' },
    'no-install': { type: 'boolean', default: false },
    'no-plain': { type: 'boolean', default: false },
  },
});
const quick = args.quick;
const plan = {
  reps: Number(args.reps ?? (quick ? 2 : 5)),
  handshakeMs: quick ? 1500 : 3000,
  handshakeConcurrency: 16,
  jsonS: quick ? 2 : 4,
  jsonConcurrency: 16,
  jsonTokens: 16,
  streamMs: quick ? 2000 : 4000,
  streamConcurrency: 32,
  streamTokens: 64,
  chunkMs: 5,
  warmupMs: quick ? 500 : 1000,
  /** The target's A/B: alternating short wrk runs against Sigil and the floor, back to back. */
  abPairs: quick ? 4 : 12,
  abS: 2,
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = (msg: string) => process.stderr.write(`[bench-tls ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

const body = (stream: boolean, tokens: number) =>
  JSON.stringify({
    model: 'bench-model',
    messages: [{ role: 'user', content: 'Say hello in one short sentence, please.' }],
    max_tokens: tokens,
    ...(stream ? { stream: true } : {}),
  });

// ---------------------------------------------------------------------------------------------------------------
// Peers

type TlsPeer = NamedPeer<TlsPeerName>;

const TSX = ['--import', 'tsx'];
const jsonHeaders = { 'content-type': 'application/json' };

function tlsTarget(port: number, creds: Credentials, headers: Record<string, string> = jsonHeaders): Target {
  return { host: '127.0.0.1', port, path: CHAT_PATH, headers, tls: { ca: creds.certPem, servername: SERVERNAME } };
}

async function startNodeHttps(dir: string, engine: Engine, creds: Credentials): Promise<TlsPeer> {
  const port = await freePort();
  const spawned = spawnLogged(
    process.execPath,
    [
      ...TSX,
      join(ROOT, 'bench', 'minimal-proxy.ts'),
      '--port',
      String(port),
      '--upstream',
      `http://127.0.0.1:${engine.port}`,
      '--cert',
      creds.certFile,
      '--key',
      creds.keyFile,
    ],
    join(dir, 'node-https.log'),
  );
  return pinnedProcess('node-https', spawned, port, tlsTarget(port, creds));
}

async function startNginxTls(dir: string, engine: Engine, creds: Credentials): Promise<TlsPeer> {
  if (nginxVersion() === undefined) throw new Error('nginx is not installed (as root: apt-get install -y nginx)');
  const port = await freePort();
  const home = join(dir, 'nginx-tls');
  mkdirSync(home, { recursive: true });
  const conf = readFileSync(join(ROOT, 'bench', 'nginx-tls.conf.template'), 'utf8')
    .replaceAll('{{user}}', process.getuid?.() === 0 ? 'user root;' : '')
    .replaceAll('{{dir}}', home)
    .replaceAll('{{port}}', String(port))
    .replaceAll('{{enginePort}}', String(engine.port))
    .replaceAll('{{cert}}', creds.certFile)
    .replaceAll('{{key}}', creds.keyFile)
    .replaceAll('{{tls12Ciphers}}', TLS_1_2_CIPHERS)
    .replaceAll('{{tls13Suites}}', TLS_1_3_CIPHERSUITES);
  writeFileSync(join(home, 'nginx.conf'), conf);
  const spawned = spawnLogged('nginx', ['-p', home, '-c', join(home, 'nginx.conf'), '-e', join(home, 'error.log')], join(dir, 'nginx-tls.log'));
  return pinnedProcess('nginx', spawned, port, tlsTarget(port, creds), () => childPids(spawned.pid), 'SIGQUIT');
}

async function startSigilTls(dir: string, engine: Engine, creds: Credentials, receipts: boolean, tls = true): Promise<TlsPeer> {
  const name: TlsPeerName = !tls ? 'sigil-plain' : receipts ? 'sigil-receipts' : 'sigil';
  const port = await freePort();
  const { config, key } = writeSigilConfig(
    join(dir, name),
    engine.port,
    port,
    'warn',
    tls ? { tls: { mode: 'files', cert_file: creds.certFile, key_file: creds.keyFile } } : {},
  );
  const spawned = spawnLogged(process.execPath, [join(ROOT, 'bin', 'sigil.js'), 'serve', '--config', config], join(dir, `${name}.log`), { cwd: ROOT });
  const headers: Record<string, string> = { ...jsonHeaders, authorization: `Bearer ${key}` };
  if (receipts) headers['x-service-receipt'] = 'true';
  return pinnedProcess(name, spawned, port, tls ? tlsTarget(port, creds, headers) : { host: '127.0.0.1', port, path: CHAT_PATH, headers });
}

function startPeer(name: TlsPeerName, dir: string, engine: Engine, creds: Credentials): Promise<TlsPeer> {
  switch (name) {
    case 'node-https':
      return startNodeHttps(dir, engine, creds);
    case 'nginx':
      return startNginxTls(dir, engine, creds);
    case 'sigil':
      return startSigilTls(dir, engine, creds, false);
    case 'sigil-receipts':
      return startSigilTls(dir, engine, creds, true);
    case 'node-http':
      return startNodeHttpProxy(dir, engine);
    case 'sigil-plain':
      return startSigilTls(dir, engine, creds, false, false);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Load processes (both on the load core, one active at a time)

type LoadWorker = ForkedWorker<LoadJob, LoadResult>;
type HandshakeWorker = ForkedWorker<HandshakeJob, HandshakeResult>;
// Keep the message types in use: the workers answer with these shapes.
export type { HandshakeMessage, WorkerMessage };

// ---------------------------------------------------------------------------------------------------------------
// Measurements

type Scenario = 'handshake' | 'json' | 'stream';

interface Sample {
  rep: number;
  peer: TlsPeerName;
  scenario: Scenario;
  /** Handshakes, requests or streams completed. */
  count: number;
  /** Per second over the measurement. */
  rate: number;
  errors: number;
  /** µs of proxy CPU (user + system, all processes and threads) per handshake, request or token event. */
  cpuUs: number;
  /** Proxy CPU over wall time (1.0: the proxy's core was saturated). */
  proxyBusy: number;
  /** Load generator's CPU over wall time (handshakes: the Node client process). */
  loadBusy?: number;
  p50: number;
  p99: number;
  resumed?: number;
  protocol?: string;
  cipher?: string;
  group?: string;
  streamsOk?: number;
  streamsBad?: number;
  tokenEvents?: number;
  mergedReads?: number;
  reads?: number;
  problem?: string;
}

async function measureHandshakes(hs: HandshakeWorker, peer: TlsPeer, rep: number, durationMs: number): Promise<Sample> {
  const job: HandshakeJob = {
    kind: 'handshake',
    host: peer.target.host,
    port: peer.target.port,
    ca: peer.target.tls!.ca,
    servername: SERVERNAME,
    concurrency: plan.handshakeConcurrency,
    durationMs,
  };
  const before = cpuMicros(peer.pids());
  const loadBefore = hs.cpu();
  const r = await hs.run(job);
  const cpu = cpuMicros(peer.pids()) - before;
  const loadCpu = hs.cpu() - loadBefore;
  const s: Sample = {
    rep,
    peer: peer.name,
    scenario: 'handshake',
    count: r.handshakes,
    rate: r.rate,
    errors: r.errors,
    cpuUs: r.handshakes > 0 ? cpu / r.handshakes : Number.NaN,
    proxyBusy: cpu / 1e6 / r.seconds,
    loadBusy: loadCpu / 1e6 / r.seconds,
    p50: r.latency.p50,
    p99: r.latency.p99,
    resumed: r.resumed,
  };
  if (r.protocol !== undefined) s.protocol = r.protocol;
  if (r.cipher !== undefined) s.cipher = r.cipher;
  if (r.group !== undefined) s.group = r.group;
  if (r.firstProblem !== undefined) s.problem = r.firstProblem;
  return s;
}

async function measureJson(dir: string, peer: TlsPeer, rep: number, seconds: number, useWrk: boolean): Promise<Sample> {
  const before = cpuMicros(peer.pids());
  const started = performance.now();
  const r = await saturate(dir, peer.target, body(false, plan.jsonTokens), plan.jsonConcurrency, seconds, LOAD_CORE, useWrk);
  const wall = (performance.now() - started) / 1000;
  const cpu = cpuMicros(peer.pids()) - before;
  return {
    rep,
    peer: peer.name,
    scenario: 'json',
    count: r.requests,
    rate: r.rps,
    errors: r.errors,
    cpuUs: r.requests > 0 ? cpu / r.requests : Number.NaN,
    proxyBusy: cpu / 1e6 / wall,
    p50: r.p50,
    p99: r.p99,
  };
}

async function measureStreams(worker: LoadWorker, peer: TlsPeer, rep: number, durationMs: number): Promise<Sample> {
  const job: LoadJob = {
    kind: 'load',
    mode: 'stream',
    target: peer.target,
    body: body(true, plan.streamTokens),
    concurrency: plan.streamConcurrency,
    durationMs,
    tokens: plan.streamTokens,
  };
  const before = cpuMicros(peer.pids());
  const started = performance.now();
  const r = await worker.run(job);
  const wall = (performance.now() - started) / 1000;
  const cpu = cpuMicros(peer.pids()) - before;
  const streamsOk = r.streamsOk ?? 0;
  // Every stream that ended in order delivered all its token events; a bad one is reported, not counted.
  const tokenEvents = streamsOk * plan.streamTokens;
  const s: Sample = {
    rep,
    peer: peer.name,
    scenario: 'stream',
    count: r.requests,
    rate: r.rps,
    errors: r.errors + r.non200,
    cpuUs: tokenEvents > 0 ? cpu / tokenEvents : Number.NaN,
    proxyBusy: cpu / 1e6 / wall,
    p50: r.latency.p50,
    p99: r.latency.p99,
    streamsOk,
    streamsBad: r.streamsBad ?? 0,
    tokenEvents,
    mergedReads: r.mergedReads ?? 0,
    reads: r.reads ?? 0,
  };
  if (r.firstProblem !== undefined) s.problem = r.firstProblem;
  return s;
}

/**
 * The target's figure, measured so that a busy shared machine weighs on both sides alike: `pairs`
 * pairs of short JSON runs (wrk, c=16) against the floor and Sigil back to back, the order alternating
 * (ABBA), one CPU-per-request ratio per pair.
 */
interface AbResult {
  a: TlsPeerName;
  b: TlsPeerName;
  ratios: number[];
  aCpu: number[];
  bCpu: number[];
}

async function abPairs(dir: string, a: TlsPeer, b: TlsPeer, pairs: number, useWrk: boolean): Promise<AbResult> {
  const out: AbResult = { a: a.name, b: b.name, ratios: [], aCpu: [], bCpu: [] };
  for (let i = 0; i < pairs; i++) {
    const first = i % 2 === 0 ? a : b;
    const second = first === a ? b : a;
    const r1 = await measureJson(dir, first, i, plan.abS, useWrk);
    const r2 = await measureJson(dir, second, i, plan.abS, useWrk);
    const ra = first === a ? r1 : r2;
    const rb = first === a ? r2 : r1;
    out.aCpu.push(ra.cpuUs);
    out.bCpu.push(rb.cpuUs);
    out.ratios.push(rb.cpuUs / ra.cpuUs);
  }
  return out;
}

function quartiles(values: number[]): { min: number; q1: number; median: number; q3: number; max: number } {
  const v = values.filter((x) => Number.isFinite(x)).sort((x, y) => x - y);
  const at = (q: number) => {
    if (v.length === 0) return Number.NaN;
    const pos = (v.length - 1) * q;
    const lo = Math.floor(pos);
    const hi = Math.ceil(pos);
    return v[lo]! + (v[hi]! - v[lo]!) * (pos - lo);
  };
  return { min: at(0), q1: at(0.25), median: at(0.5), q3: at(0.75), max: at(1) };
}

// ---------------------------------------------------------------------------------------------------------------
// Report

const fmt = (v: number, digits = 0) =>
  Number.isFinite(v) ? v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : 'n/a';
const cell = (s: Spread, digits = 0) => (Number.isFinite(s.median) ? `${fmt(s.median, digits)} (${fmt(s.min, digits)}–${fmt(s.max, digits)})` : 'n/a');

interface Summary {
  peer: TlsPeerName;
  values: Record<string, Spread>;
  streamsOk: number;
  streamsBad: number;
  tokenEvents: number;
  mergedReads: number;
  reads: number;
  errors: number;
  resumed: number;
  handshakeWith?: string;
  rssMb?: number;
}

function summarise(peers: TlsPeerName[], samples: Sample[], rss: Map<TlsPeerName, number>): Summary[] {
  const get = (peer: TlsPeerName, scenario: Scenario, rep: number) => samples.find((s) => s.peer === peer && s.scenario === scenario && s.rep === rep);
  const reps = [...new Set(samples.map((s) => s.rep))];
  return peers.map((peer) => {
    const mine = samples.filter((s) => s.peer === peer);
    const values: Record<string, Spread> = {};
    for (const scenario of ['handshake', 'json', 'stream'] as Scenario[]) {
      const of = mine.filter((s) => s.scenario === scenario);
      values[`${scenario}.rate`] = spread(of.map((s) => s.rate));
      values[`${scenario}.cpuUs`] = spread(of.map((s) => s.cpuUs));
      values[`${scenario}.proxyBusy`] = spread(of.map((s) => s.proxyBusy));
      values[`${scenario}.p50`] = spread(of.map((s) => s.p50));
      values[`${scenario}.p99`] = spread(of.map((s) => s.p99));
      if (scenario === 'handshake') values['handshake.loadBusy'] = spread(of.map((s) => s.loadBusy ?? Number.NaN));
      // Ratios to the floor (plain references: to the plain floor) within the same repetition, then their spread.
      const floor = PLAIN.has(peer) ? PLAIN_FLOOR : FLOOR;
      for (const metric of ['rate', 'cpuUs'] as const) {
        values[`${scenario}.${metric}.vsFloor`] = spread(
          reps.map((rep) => {
            const a = get(peer, scenario, rep);
            const b = get(floor, scenario, rep);
            return a === undefined || b === undefined ? Number.NaN : a[metric] / b[metric];
          }),
        );
      }
      // CPU that TLS adds: this peer minus its plain twin, in the same repetition.
      const twin = PLAIN_TWIN[peer];
      if (twin !== undefined && scenario !== 'handshake') {
        values[`${scenario}.cpuUs.tlsAdded`] = spread(
          reps.map((rep) => {
            const a = get(peer, scenario, rep);
            const b = get(twin, scenario, rep);
            return a === undefined || b === undefined ? Number.NaN : a.cpuUs - b.cpuUs;
          }),
        );
      }
    }
    const hs = mine.find((s) => s.scenario === 'handshake' && s.protocol !== undefined);
    const streams = mine.filter((s) => s.scenario === 'stream');
    const summary: Summary = {
      peer,
      values,
      streamsOk: streams.reduce((a, s) => a + (s.streamsOk ?? 0), 0),
      streamsBad: streams.reduce((a, s) => a + (s.streamsBad ?? 0), 0),
      tokenEvents: streams.reduce((a, s) => a + (s.tokenEvents ?? 0), 0),
      mergedReads: streams.reduce((a, s) => a + (s.mergedReads ?? 0), 0),
      reads: streams.reduce((a, s) => a + (s.reads ?? 0), 0),
      errors: mine.reduce((a, s) => a + s.errors, 0),
      resumed: mine.reduce((a, s) => a + (s.resumed ?? 0), 0),
    };
    if (hs !== undefined) summary.handshakeWith = `${hs.protocol} ${hs.cipher} ${hs.group ?? ''}`.trim();
    const r = rss.get(peer);
    if (r !== undefined) summary.rssMb = r;
    return summary;
  });
}

interface Meta {
  date: string;
  command: string;
  mode: string;
  machine: string;
  node: string;
  tools: Record<string, string>;
  commit: string;
  seconds: number;
  loadAverage: { before: number[]; after: number[] };
}

function render(
  meta: Meta,
  summaries: Summary[],
  samples: Sample[],
  unavailable: { name: TlsPeerName; note: string }[],
  ab: AbResult[],
): { table: string; full: string } {
  const L: string[] = [];
  const la = (l: number[]) => l.map((v) => v.toFixed(2)).join(' / ');
  L.push(
    `Run ${meta.date} (\`${meta.command}\`, ${meta.seconds} s) on ${meta.machine}; Node ${meta.node}; ${Object.entries(meta.tools)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}; Sigil at ${meta.commit}.`,
  );
  L.push(
    `Mode \`${meta.mode}\`, ${plan.reps} interleaved repetitions; each cell is the median over repetitions with (min–max); ratios are taken to the node:https floor within each repetition. ${hasTaskset ? 'Proxies pinned to core 0; engine and load generators to core 1 (taskset).' : 'No CPU pinning (taskset missing).'} Load average (1 / 5 / 15 min): ${la(meta.loadAverage.before)} before, ${la(meta.loadAverage.after)} after.`,
  );
  L.push(
    `One P-256 key and self-signed certificate (openssl) for every peer; TLS 1.2/1.3 with Sigil's suites and groups everywhere. Handshakes: ${plan.handshakeConcurrency} concurrent loops of connect + full handshake + close from one Node process, ${plan.handshakeMs / 1000} s. JSON: wrk, ${plan.jsonConcurrency} kept-alive HTTPS connections, ${plan.jsonS} s, ${plan.jsonTokens}-token answers. Streams: ${plan.streamConcurrency} concurrent kept-alive HTTPS streams of ${plan.streamTokens} token events (${plan.chunkMs} ms apart), ${plan.streamMs / 1000} s, from a node:https client process. For reference, the same JSON and stream loads also run over plain HTTP against a minimal node:http proxy and Sigil without TLS.`,
  );
  for (const u of unavailable) L.push(`- **${u.name}** not measured: ${u.note}`);
  L.push('');
  const table: string[] = [];
  table.push(
    '| peer | full handshakes/s | × floor | proxy CPU µs/handshake | × floor | JSON req/s (keep-alive, c=16) | × floor | proxy CPU µs/request | × floor | proxy CPU µs/stream event | × floor | streams complete, in order | reads with >1 token event |',
  );
  table.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  const tlsPeers = summaries.filter((s) => !PLAIN.has(s.peer));
  for (const s of tlsPeers) {
    const v = s.values;
    table.push(
      `| ${LABELS[s.peer]} | ${cell(v['handshake.rate']!)} | ${cell(v['handshake.rate.vsFloor']!, 2)} | ${cell(v['handshake.cpuUs']!)} | ${cell(v['handshake.cpuUs.vsFloor']!, 2)} | ${cell(v['json.rate']!)} | ${cell(v['json.rate.vsFloor']!, 2)} | ${cell(v['json.cpuUs']!)} | ${cell(v['json.cpuUs.vsFloor']!, 2)} | ${cell(v['stream.cpuUs']!, 1)} | ${cell(v['stream.cpuUs.vsFloor']!, 2)} | ${fmt(s.streamsOk)} of ${fmt(s.streamsOk + s.streamsBad)} | ${fmt(s.mergedReads)} of ${fmt(s.reads)} |`,
    );
  }
  L.push(...table, '');
  L.push(
    '**Saturation and latency** (proxy busy: its CPU time over wall time, 1.00 = its core is full; client busy: the handshake client process on the load core)',
  );
  L.push('');
  L.push(
    '| peer | handshake: proxy busy | handshake: client busy | handshake p50 / p99 µs | JSON: proxy busy | JSON p50 / p99 µs (wrk) | streams: proxy busy | stream TTFB p50 / p99 µs | negotiated | RSS at end (MB) |',
  );
  L.push('|---|---|---|---|---|---|---|---|---|---|');
  for (const s of tlsPeers) {
    const v = s.values;
    L.push(
      `| ${LABELS[s.peer]} | ${cell(v['handshake.proxyBusy']!, 2)} | ${cell(v['handshake.loadBusy']!, 2)} | ${fmt(v['handshake.p50']!.median)} / ${fmt(v['handshake.p99']!.median)} | ${cell(v['json.proxyBusy']!, 2)} | ${fmt(v['json.p50']!.median)} / ${fmt(v['json.p99']!.median)} | ${cell(v['stream.proxyBusy']!, 2)} | ${fmt(v['stream.p50']!.median)} / ${fmt(v['stream.p99']!.median)} | ${s.handshakeWith ?? 'n/a'} | ${s.rssMb === undefined ? 'n/a' : fmt(s.rssMb, 1)} |`,
    );
  }
  L.push('');
  const plain = summaries.filter((s) => PLAIN.has(s.peer));
  if (plain.length > 0) {
    L.push(
      '**What TLS itself adds** (the plain-HTTP twins in the same run: `bench/minimal-proxy.ts` and Sigil without `tls`; "added by TLS" is the TLS peer minus its twin within each repetition)',
    );
    L.push('');
    L.push(
      '| peer | JSON req/s (c=16, wrk) | proxy CPU µs/request | × plain floor | proxy CPU µs/stream event | × plain floor | streams complete, in order | reads with >1 token event |',
    );
    L.push('|---|---|---|---|---|---|---|---|');
    for (const s of plain) {
      const v = s.values;
      L.push(
        `| ${LABELS[s.peer]} | ${cell(v['json.rate']!)} | ${cell(v['json.cpuUs']!)} | ${cell(v['json.cpuUs.vsFloor']!, 2)} | ${cell(v['stream.cpuUs']!, 1)} | ${cell(v['stream.cpuUs.vsFloor']!, 2)} | ${fmt(s.streamsOk)} of ${fmt(s.streamsOk + s.streamsBad)} | ${fmt(s.mergedReads)} of ${fmt(s.reads)} |`,
      );
    }
    L.push('');
    L.push('| CPU added by TLS | per JSON request (µs) | per stream event (µs) |');
    L.push('|---|---|---|');
    for (const s of tlsPeers) {
      if (s.values['json.cpuUs.tlsAdded'] === undefined) continue;
      L.push(
        `| ${LABELS[s.peer]} minus ${LABELS[PLAIN_TWIN[s.peer]!]} | ${cell(s.values['json.cpuUs.tlsAdded'])} | ${cell(s.values['stream.cpuUs.tlsAdded']!, 1)} |`,
      );
    }
    L.push('');
  }
  const abRow = (r: AbResult) => {
    const q = quartiles(r.ratios);
    // q: the spread of the per-pair ratios
    return {
      line: `| ${LABELS[r.b]} vs ${LABELS[r.a]} | ${r.ratios.length} | ${fmt(quartiles(r.aCpu).median)} | ${fmt(quartiles(r.bCpu).median)} | **${fmt(q.median, 2)}** | ${fmt(q.q1, 2)}–${fmt(q.q3, 2)} | ${fmt(q.min, 2)}–${fmt(q.max, 2)} |`,
    };
  };
  if (ab.length > 0) {
    L.push(
      `**CPU per request, A/B** (the target's figure measured a second way: ${ab[0]!.ratios.length} pairs of ${plan.abS} s wrk runs, c=${plan.jsonConcurrency}, the two peers back to back in alternating order; one ratio per pair, so a burst of other work on the machine weighs on both sides of a ratio alike)`,
    );
    L.push('');
    L.push('| pair | pairs | CPU µs/request, first (median) | CPU µs/request, second (median) | ratio, median | ratio, middle half | ratio, min–max |');
    L.push('|---|---|---|---|---|---|---|');
    for (const r of ab) L.push(abRow(r).line);
    L.push('');
  }
  // Targets
  const targetLines: string[] = ['| target | measured | holds |', '|---|---|---|'];
  const abTarget = ab.find((r) => r.a === FLOOR && r.b === 'sigil');
  if (abTarget !== undefined) {
    const q = quartiles(abTarget.ratios);
    targetLines.push(
      `| ${LABELS.sigil}: CPU per JSON request ≤ ${TARGET_RATIO}× the bare node:https floor (A/B pairs) | ${fmt(q.median, 2)}× (middle half ${fmt(q.q1, 2)}–${fmt(q.q3, 2)}, ${abTarget.ratios.length} pairs) | ${q.median <= TARGET_RATIO ? 'yes' : '**no**'} |`,
    );
  }
  for (const name of ['sigil', 'sigil-receipts'] as TlsPeerName[]) {
    const s = summaries.find((x) => x.peer === name);
    if (s === undefined) continue;
    const ratio = s.values['json.cpuUs.vsFloor']!;
    if (name === 'sigil' || Number.isFinite(ratio.median)) {
      targetLines.push(
        `| ${LABELS[name]}: CPU per JSON request ≤ ${TARGET_RATIO}× the bare node:https floor (repetitions) | ${fmt(ratio.median, 2)}× (${fmt(ratio.min, 2)}–${fmt(ratio.max, 2)} over repetitions; ${fmt(s.values['json.cpuUs']!.median)} vs ${fmt(summaries.find((x) => x.peer === FLOOR)?.values['json.cpuUs']!.median ?? Number.NaN)} µs) | ${ratio.median <= TARGET_RATIO ? 'yes' : '**no**'}${name === 'sigil-receipts' ? ' (not part of the target: one ES256 signature per request)' : ''} |`,
      );
    }
    const held = s.streamsBad === 0 && s.mergedReads === 0 && s.streamsOk > 0 && s.errors === 0;
    targetLines.push(
      `| ${LABELS[name]}: no stream event held back | ${fmt(s.streamsOk)} streams complete and in order, ${fmt(s.streamsBad)} bad, ${fmt(s.errors)} errors; ${fmt(s.mergedReads)} of ${fmt(s.reads)} reads carried >1 token event | ${held ? 'yes' : '**no**'} |`,
    );
  }
  L.push(...targetLines, '');
  const resumed = summaries.reduce((a, s) => a + s.resumed, 0);
  L.push(`Handshakes resumed from a session: ${resumed} (must be 0: every handshake counted is a full one).`);
  L.push('');
  const full: string[] = ['# TLS benchmark: raw output', '', ...L, '## Every sample', ''];
  full.push(
    '| rep | peer | scenario | count | per s | errors | proxy CPU µs per unit | proxy busy | client busy | p50 µs | p99 µs | streams ok / bad | reads >1 event / reads | problem |',
  );
  full.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const s of samples) {
    full.push(
      `| ${s.rep} | ${s.peer} | ${s.scenario} | ${s.count} | ${fmt(s.rate)} | ${s.errors} | ${fmt(s.cpuUs, 1)} | ${fmt(s.proxyBusy, 2)} | ${s.loadBusy === undefined ? '' : fmt(s.loadBusy, 2)} | ${fmt(s.p50)} | ${fmt(s.p99)} | ${s.streamsOk === undefined ? '' : `${s.streamsOk} / ${s.streamsBad}`} | ${s.reads === undefined ? '' : `${s.mergedReads} / ${s.reads}`} | ${s.problem ?? ''} |`,
    );
  }
  for (const r of ab) {
    full.push(
      '',
      `A/B ${r.b} / ${r.a}, per pair (CPU µs/request ${r.a}, ${r.b}, ratio): ${r.ratios.map((x, i) => `${fmt(r.aCpu[i]!)}, ${fmt(r.bCpu[i]!)}, ${fmt(x, 2)}`).join('; ')}`,
    );
  }
  full.push(
    '',
    'Units: handshake = one full handshake; json = one request; stream = one token event (CPU) or one stream (count, per s, latency = time to first chunk).',
    '',
  );
  return { table: L.join('\n'), full: full.join('\n') };
}

function updateReadme(markdown: string): void {
  const file = join(ROOT, 'bench', 'README.md');
  if (!existsSync(file)) return;
  const text = readFileSync(file, 'utf8');
  const start = '<!-- bench:tls:start -->';
  const end = '<!-- bench:tls:end -->';
  const a = text.indexOf(start);
  const b = text.indexOf(end);
  if (a === -1 || b < a) return;
  writeFileSync(file, text.slice(0, a + start.length) + '\n' + markdown + text.slice(b));
}

function ensureTools(): void {
  const missing = [wrkVersion() === undefined ? 'wrk' : '', nginxVersion() === undefined ? 'nginx' : ''].filter(Boolean);
  if (missing.length === 0 || args['no-install'] || process.getuid?.() !== 0) return;
  log(`installing ${missing.join(' ')} from Debian (apt-get)…`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  if (spawnSync('apt-get', ['install', '-y', '-qq', ...missing], { stdio: 'ignore', timeout: 240_000, env }).status !== 0)
    log(`could not install ${missing.join(' ')}`);
}

// ---------------------------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const started = Date.now();
  const loadBefore = loadavg();
  if (loadBefore[0]! > 1.5) log(`warning: load average ${loadBefore[0]!.toFixed(1)} before the run; other processes share these cores`);
  const watchdog = setTimeout(
    () => {
      log('time limit reached: stopping everything');
      killAllStarted();
      process.exit(1);
    },
    (quick ? 6 : 15) * 60_000,
  );
  watchdog.unref();
  if (!existsSync(join(ROOT, 'dist', 'cli', 'main.js'))) throw new Error('dist/ is missing: run `npm run build` first (Sigil runs as bin/sigil.js)');

  mkdirSync(RESULTS, { recursive: true });
  ensureTools();
  const useWrk = wrkVersion() !== undefined;
  const dir = mkdtempSync(join(tmpdir(), 'sigil-bench-tls-'));
  const creds = makeCredentials(dir);
  const engine = await startEngine(dir, plan.chunkMs, 0);
  const loadWorker: LoadWorker = new ForkedWorker<LoadJob, LoadResult>('load-client.ts');
  const hsWorker: HandshakeWorker = new ForkedWorker<HandshakeJob, HandshakeResult>('tls-handshake.ts');
  const live: TlsPeer[] = [];
  try {
    const wanted = (args.peers === undefined ? ALL_PEERS : (args.peers.split(',') as TlsPeerName[]).filter((p) => ALL_PEERS.includes(p))).filter(
      (p) => !(args['no-plain'] && PLAIN.has(p)),
    );
    if (!wanted.includes(FLOOR)) wanted.unshift(FLOOR);
    const unavailable: { name: TlsPeerName; note: string }[] = [];
    for (const name of wanted) {
      try {
        const peer = await startPeer(name, dir, engine, creds);
        const json = await loadWorker.run({
          kind: 'load',
          mode: 'json',
          target: peer.target,
          body: body(false, plan.jsonTokens),
          concurrency: 1,
          durationMs: 300,
          tokens: plan.jsonTokens,
        });
        const stream = await loadWorker.run({
          kind: 'load',
          mode: 'stream',
          target: peer.target,
          body: body(true, 4),
          concurrency: 1,
          durationMs: 300,
          tokens: 4,
        });
        const hs = PLAIN.has(name)
          ? { handshakes: 1, errors: 0, protocol: 'plain HTTP', cipher: '', group: '', firstProblem: undefined }
          : await hsWorker.run({
              kind: 'handshake',
              host: peer.target.host,
              port: peer.target.port,
              ca: creds.certPem,
              servername: SERVERNAME,
              concurrency: 1,
              durationMs: 200,
            });
        const problem =
          json.requests === 0 || json.non200 > 0
            ? `JSON over HTTPS failed (${json.firstProblem ?? 'no answer'})`
            : stream.streamsOk === 0 || (stream.streamsBad ?? 0) > 0
              ? `streams over HTTPS failed (${stream.firstProblem ?? 'no answer'})`
              : hs.handshakes === 0 || hs.errors > 0
                ? `handshakes failed (${hs.firstProblem ?? 'none completed'})`
                : undefined;
        if (problem !== undefined) {
          await peer.stop();
          throw new Error(problem);
        }
        live.push(peer);
        log(`${name}: ready (${hs.protocol} ${hs.cipher} ${hs.group ?? ''})`);
      } catch (err) {
        unavailable.push({ name, note: (err as Error).message });
        log(`${name}: skipped (${(err as Error).message})`);
      }
    }
    if (!live.some((p) => p.name === FLOOR)) throw new Error('the node:https floor did not start: nothing to compare with');

    log('warm-up…');
    for (const peer of live) {
      if (!PLAIN.has(peer.name)) await measureHandshakes(hsWorker, peer, 0, plan.warmupMs / 2);
      await saturate(dir, peer.target, body(false, plan.jsonTokens), plan.jsonConcurrency, 1, LOAD_CORE, useWrk);
      await measureStreams(loadWorker, peer, 0, plan.warmupMs);
    }

    const samples: Sample[] = [];
    for (let rep = 1; rep <= plan.reps; rep++) {
      const order = live.map((_, i) => live[(i + rep - 1) % live.length]!);
      log(`repetition ${rep}/${plan.reps}: ${order.map((p) => p.name).join(', ')}`);
      for (const scenario of ['handshake', 'json', 'stream'] as Scenario[]) {
        for (const peer of order) {
          if (scenario === 'handshake' && PLAIN.has(peer.name)) continue;
          await sleep(200);
          if (scenario === 'handshake') samples.push(await measureHandshakes(hsWorker, peer, rep, plan.handshakeMs));
          else if (scenario === 'json') samples.push(await measureJson(dir, peer, rep, plan.jsonS, useWrk));
          else samples.push(await measureStreams(loadWorker, peer, rep, plan.streamMs));
        }
      }
    }
    const ab: AbResult[] = [];
    const byName = (n: TlsPeerName) => live.find((p) => p.name === n);
    for (const [a, b] of [
      [FLOOR, 'sigil'],
      [PLAIN_FLOOR, 'sigil-plain'],
    ] as [TlsPeerName, TlsPeerName][]) {
      const pa = byName(a);
      const pb = byName(b);
      if (pa === undefined || pb === undefined) continue;
      log(`A/B: ${plan.abPairs} pairs, ${a} and ${b}…`);
      ab.push(await abPairs(dir, pa, pb, plan.abPairs, useWrk));
    }
    const rss = new Map<TlsPeerName, number>(live.map((p) => [p.name, rssMb(p.pids())]));
    for (const peer of live) await peer.stop();
    live.length = 0;

    const tools: Record<string, string> = { openssl: creds.opensslVersion.replace(/^OpenSSL\s+/, '').split(' ')[0] ?? creds.opensslVersion };
    const nv = nginxVersion();
    if (nv) tools.nginx = nv;
    const wv = wrkVersion();
    tools[wv ? 'wrk' : 'autocannon'] = wv ?? 'from npm';
    const meta: Meta = {
      date: new Date().toISOString().slice(0, 16).replace('T', ' ') + ' UTC',
      command: `npx tsx bench/tls.ts${process.argv.slice(2).length > 0 ? ' ' + process.argv.slice(2).join(' ') : ''}`,
      mode: quick ? '--quick' : 'full',
      machine: describeMachine(),
      node: process.version,
      tools,
      commit: sigilCommit(),
      seconds: Math.round((Date.now() - started) / 1000),
      loadAverage: { before: loadBefore, after: loadavg() },
    };
    const summaries = summarise(
      ALL_PEERS.filter((p) => samples.some((s) => s.peer === p)),
      samples,
      rss,
    );
    const { table, full } = render(meta, summaries, samples, unavailable, ab);
    const stem = quick ? 'tls-quick' : 'tls-latest';
    writeFileSync(join(RESULTS, `${stem}.md`), full);
    writeFileSync(join(RESULTS, `${stem}.json`), JSON.stringify({ meta, plan, summaries, samples, ab, unavailable }, null, 2) + '\n');
    if (!quick && args.reps === undefined && args.peers === undefined) updateReadme(table);
    process.stdout.write(full);
    log(`done in ${Math.round((Date.now() - started) / 1000)} s; wrote bench/results/${stem}.md and .json`);
    return 0;
  } finally {
    for (const peer of live) await peer.stop();
    await loadWorker.stop();
    await hsWorker.stop();
    await stopChild(engine.spawned.child);
    rmSync(dir, { recursive: true, force: true });
  }
}

runBenchmark(main, log);
