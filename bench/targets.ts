/**
 * The performance targets in one run, as ratios to a bare node:http proxy on the same core (each reported,
 * none asserted by a timed test):
 *
 *   npm run build && npx tsx bench/targets.ts [--rounds 3] [--seconds 3] [--quick]
 *
 * Peers: bench/minimal-proxy.ts (the floor), Sigil without receipts and Sigil with a receipt on every
 * request (two processes of dist's `bin/sigil.js serve`, `workers: 1`); every proxy pinned to the proxy
 * core, the engine and the load on the other. Scenarios, each run for every peer in an order that rotates
 * every round (so drift of a shared machine hits all alike), each ratio taken within its round:
 *
 * - streams of 200 token events, 100 at once (the issue's shape) and of 16 events, 50 at once (bench/run.ts's,
 *   where each stream's fixed cost weighs more): proxy CPU per token event; Sigil's EHBP row sends the same
 *   streams sealed by the npm `ehbp` client (sealed before the phase, so sealing does not count) to Sigil's
 *   plain process and opens every answer. Every stream, clear or sealed, is checked event by event (role,
 *   t1..tN in order, finish, [DONE]).
 * - JSON at c=50 from wrk: requests/s and proxy CPU per request.
 * - EHBP JSON: Sigil's CPU per sealed JSON request against the same request in the clear, same process
 *   and client (undici, c=8, as bench/ab.ts).
 * - Oblivious HTTP JSON and streams (`ohttp-json`, `ohttp-stream`): the same chat, encapsulated before the phase and
 *   posted to Sigil's gateway as a relay forwards it, against it in the clear and sealed with EHBP, on the same
 *   process; every answer is opened and its inner status (JSON) or every event (streams) checked.
 *
 * The engine streams one event every 5 ms (as bench/ab.ts): 100 streams ask for 20,000 events/s, which the
 * engine keeps up with on the load core and which keeps the floor's core about half busy with one event per
 * read (no proxy saturated, so none gets its events coalesced and cheaper). At 0 ms the engine's timers
 * (Node's 1 ms minimum) and its CPU on the load core would set the pace, and events would reach the proxy
 * coalesced, so CPU per event would measure how many events share a read, not what the proxy does per event.
 * Opening every sealed stream costs the client more than the proxy, so the EHBP streams' rate is the
 * client's (see their units/s and proxy busy); CPU per event is still the proxy's own.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Agent, request, type Dispatcher } from 'undici';
import { fetchServerIdentity, openSealedFrames, sealBatch, sendBackToBack, type SealedRequest } from './ehbp-client.ts';
import { encapsulateRequest, type EncapsulatedRequest } from '../src/client/ohttp-encapsulate.ts';
import { BinaryResponseReader, decodeResponse, encodeRequest } from '../src/protocol/bhttp.ts';
import { CHUNKED_REQUEST_MEDIA_TYPE, GATEWAY_PATH, parseKeyConfigs, REQUEST_MEDIA_TYPE, type Framing } from '../src/protocol/ohttp.ts';
import { ForkedWorker } from './forked-worker.ts';
import { StreamReader, type LoadJob, type LoadResult } from './load-client.ts';
import { describeMachine, sigilCommit } from './machine.ts';
import { LOAD_CORE, PROXY_CORE, ROOT, startEngine, startNodeHttpProxy, startSigil, type NamedPeer } from './peers.ts';
import { cpuMicros, hasTaskset, pin, runBenchmark, stopChild } from './processes.ts';
import { spread } from './stats.ts';
import { saturate, wrkVersion } from './wrk.ts';

const CHUNK_MS = 5;
const JSON_TOKENS = 16;
const JSON_CONCURRENCY = 50;
const EHBP_JSON_CONCURRENCY = 8;
const RESULTS = join(ROOT, 'bench', 'results');

const { values: args } = parseArgs({
  options: { rounds: { type: 'string' }, seconds: { type: 'string' }, quick: { type: 'boolean', default: false }, only: { type: 'string' } },
});
const rounds = Number(args.rounds ?? (args.quick ? 1 : 3));
const seconds = Number(args.seconds ?? (args.quick ? 1 : 3));
const log = (msg: string) => process.stderr.write(`[targets ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

const body = (stream: boolean, tokens: number) =>
  JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'Say hello in one short sentence, please.' }], max_tokens: tokens, stream });

type ProxyName = 'node-http' | 'sigil' | 'sigil-receipts';
type Proxy = NamedPeer<ProxyName>;
/** A way of loading one proxy: the proxies themselves, and Sigil's plain process sent sealed (EHBP) or clear requests by undici. */
type Variant = ProxyName | 'sigil-ehbp' | 'sigil-clear' | 'sigil-ohttp';
const LABELS: Record<Variant, string> = {
  'node-http': 'bare node:http proxy (floor)',
  sigil: 'Sigil',
  'sigil-receipts': 'Sigil, receipt on every request',
  'sigil-ehbp': 'Sigil, EHBP (sealed)',
  'sigil-clear': 'Sigil, in the clear (same client as EHBP)',
  'sigil-ohttp': 'Sigil, Oblivious HTTP (posted to its gateway, as a relay would)',
};

interface Scenario {
  id: string;
  label: string;
  unit: string;
  variants: Variant[];
  /** The variant every ratio of this scenario is taken to. */
  floor: Variant;
  /** Stream shape (absent: JSON). */
  streams?: { concurrency: number; tokens: number };
}

const streamScenario = (concurrency: number, tokens: number): Scenario => ({
  id: `stream-${concurrency}x${tokens}`,
  label: `streams, ${concurrency} at once × ${tokens} token events`,
  unit: 'token event',
  variants: ['node-http', 'sigil', 'sigil-receipts', 'sigil-ehbp'],
  floor: 'node-http',
  streams: { concurrency, tokens },
});

const ALL_SCENARIOS: Scenario[] = [
  streamScenario(100, 200),
  streamScenario(50, 16),
  { id: 'json-c50', label: `JSON, wrk c=${JSON_CONCURRENCY}`, unit: 'request', variants: ['node-http', 'sigil', 'sigil-receipts'], floor: 'node-http' },
  { id: 'ehbp-json', label: `EHBP JSON, c=${EHBP_JSON_CONCURRENCY}`, unit: 'request', variants: ['sigil-clear', 'sigil-ehbp'], floor: 'sigil-clear' },
  {
    id: 'ohttp-json',
    label: `Oblivious HTTP JSON, c=${EHBP_JSON_CONCURRENCY}`,
    unit: 'request',
    variants: ['sigil-clear', 'sigil-ehbp', 'sigil-ohttp'],
    floor: 'sigil-clear',
  },
  {
    id: 'ohttp-stream',
    label: 'Oblivious HTTP streams, 50 at once × 16 token events',
    unit: 'token event',
    variants: ['sigil', 'sigil-ehbp', 'sigil-ohttp'],
    floor: 'sigil',
    streams: { concurrency: 50, tokens: 16 },
  },
];
/** `--only a,b`: just those scenarios (ids as in the table: stream-100x200, stream-50x16, json-c50, ehbp-json, ohttp-json, ohttp-stream). */
const SCENARIOS = args.only === undefined ? ALL_SCENARIOS : ALL_SCENARIOS.filter((scenario) => args.only!.split(',').includes(scenario.id));
if (SCENARIOS.length === 0) throw new Error(`--only: no scenario named ${args.only} (known: ${ALL_SCENARIOS.map((x) => x.id).join(', ')})`);

interface Sample {
  round: number;
  scenario: string;
  variant: Variant;
  /** Token events (streams) or requests delivered whole. */
  units: number;
  seconds: number;
  cpuUs: number;
  /** Proxy CPU over wall time: 1.00 is its core full. */
  busy: number;
  perSecond: number;
  errors: number;
  streamsOk?: number;
  streamsBad?: number;
  /** Reads (sealed: frames) that carried more than one token event, and all reads. */
  mergedReads?: number;
  reads?: number;
  problem?: string;
}

type Measured = Omit<Sample, 'round' | 'scenario' | 'variant' | 'cpuUs' | 'busy'>;

const agent = new Agent({ connections: 256 });

/** What the sealed and oblivious stream phases count: streams whole or not, reads, errors, the first problem. */
class StreamTally {
  ok = 0;
  bad = 0;
  merged = 0;
  reads = 0;
  errors = 0;
  problem: string | undefined;

  fail(problem: string): void {
    this.errors++;
    this.problem ??= problem;
  }

  checked(check: ReturnType<StreamReader['finish']>): void {
    if (check.ok) this.ok++;
    else {
      this.bad++;
      this.problem ??= check.problem;
    }
  }

  measured(tokens: number, seconds: number): Measured {
    return {
      units: this.ok * tokens,
      seconds,
      perSecond: (this.ok * tokens) / seconds,
      errors: this.errors,
      streamsOk: this.ok,
      streamsBad: this.bad,
      mergedReads: this.merged,
      reads: this.reads,
      ...(this.problem === undefined ? {} : { problem: this.problem }),
    };
  }
}

/** EHBP streams from this process: each answer opened frame by frame and checked as load-client checks a clear one. */
async function sealedStreams(proxy: Proxy, concurrency: number, tokens: number, s: number, start: () => void): Promise<Measured> {
  const perLoop = Math.ceil((s * 1000) / (tokens * CHUNK_MS)) + 1;
  const base = `http://${proxy.target.host}:${proxy.target.port}`;
  const url = `${base}${proxy.target.path}`;
  const identity = await fetchServerIdentity(base, agent);
  const prepared = await sealBatch(identity, url, proxy.target.headers, body(true, tokens), concurrency * perLoop);
  const tally = new StreamTally();
  const fail = (problem: string) => tally.fail(problem);
  start();
  const read = async (response: Dispatcher.ResponseData, one: SealedRequest) => {
    if (response.statusCode !== 200) return fail(`status ${response.statusCode}: ${(await response.body.text()).slice(0, 160)}`);
    const reader = new StreamReader(tokens, [], () => tally.merged++);
    for await (const frame of openSealedFrames(identity, response, one.context!)) {
      tally.reads++;
      reader.read(Buffer.from(frame).toString('latin1'), 0);
    }
    tally.checked(reader.finish());
  };
  const sent = await sendBackToBack(
    url,
    prepared,
    concurrency,
    s,
    agent,
    (response, one) => read(response, one).catch((err: Error) => fail(err.message)),
    (err) => fail(`${err.message} (${url})`),
  );
  return tally.measured(tokens, sent.seconds);
}

/** JSON requests from this process, sealed (before the phase) or in the clear, so both go through the same client. */
async function jsonBackToBack(proxy: Proxy, variant: Variant, s: number, start: () => void): Promise<Measured> {
  const base = `http://${proxy.target.host}:${proxy.target.port}`;
  const payload = body(false, JSON_TOKENS);
  const count = Math.max(200, Math.round(s * 1000));
  // Oblivious HTTP is posted to the gateway, sealed before the phase as a relay would forward it; its answers are not opened.
  const url = variant === 'sigil-ohttp' ? `${base}${GATEWAY_PATH}` : `${base}${proxy.target.path}`;
  const prepared =
    variant === 'sigil-ehbp'
      ? await sealBatch(await fetchServerIdentity(base, agent), url, proxy.target.headers, payload, count)
      : variant === 'sigil-ohttp'
        ? await encapsulateBatch(base, proxy.target.path, proxy.target.headers, payload, count, 'whole')
        : Array<SealedRequest>(count).fill({ headers: proxy.target.headers, body: Buffer.from(payload) });
  let errors = 0;
  let problem: string | undefined;
  start();
  const sent = await sendBackToBack(
    url,
    prepared,
    EHBP_JSON_CONCURRENCY,
    s,
    agent,
    async (response, one) => {
      const answer = new Uint8Array(await response.body.arrayBuffer());
      // The gateway answers 200 to whatever it opened: the inner status is inside the seal.
      const open = openers.get(one);
      const status = response.statusCode === 200 && open !== undefined ? decodeResponse(await open.openResponse(answer)).status : response.statusCode;
      if (status === 200) return;
      errors++;
      problem ??= `status ${status}`;
    },
    (err) => {
      errors++;
      problem ??= `${err.message} (${url})`;
    },
  );
  const units = sent.sent - errors;
  return { units, seconds: sent.seconds, perSecond: units / sent.seconds, errors, ...(problem === undefined ? {} : { problem }) };
}

/** What opens the answer to each encapsulated request. */
const openers = new WeakMap<SealedRequest, EncapsulatedRequest>();

/** Chat requests as binary HTTP, each sealed to the gateway's key (fetched from Sigil, as a client checks it) ahead of the phase. */
async function encapsulateBatch(
  base: string,
  path: string,
  headers: Record<string, string>,
  payload: string,
  count: number,
  framing: Framing,
): Promise<SealedRequest[]> {
  const keys = parseKeyConfigs(new Uint8Array(await (await request(`${base}${GATEWAY_PATH}`, { dispatcher: agent })).body.arrayBuffer()));
  const fields = Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value] as const);
  const inner = encodeRequest({ method: 'POST', scheme: 'https', authority: 'sigil', path, headers: fields, content: Buffer.from(payload), trailers: [] });
  return Promise.all(
    Array.from({ length: count }, async () => {
      const sealed = await encapsulateRequest(keys, inner, framing);
      const one: SealedRequest = { headers: { 'content-type': framing === 'whole' ? REQUEST_MEDIA_TYPE : CHUNKED_REQUEST_MEDIA_TYPE }, body: sealed.body };
      openers.set(one, sealed);
      return one;
    }),
  );
}

/** Oblivious HTTP streams, encapsulated (chunked) before the phase: each answer opened chunk by chunk and checked event by event. */
async function obliviousStreams(proxy: Proxy, concurrency: number, tokens: number, s: number, start: () => void): Promise<Measured> {
  const perLoop = Math.ceil((s * 1000) / (tokens * CHUNK_MS)) + 1;
  const base = `http://${proxy.target.host}:${proxy.target.port}`;
  const url = `${base}${GATEWAY_PATH}`;
  const prepared = await encapsulateBatch(base, proxy.target.path, proxy.target.headers, body(true, tokens), concurrency * perLoop, 'chunked');
  const tally = new StreamTally();
  const fail = (problem: string) => tally.fail(problem);
  start();
  const read = async (response: Dispatcher.ResponseData, one: SealedRequest) => {
    if (response.statusCode !== 200) return fail(`status ${response.statusCode}: ${(await response.body.text()).slice(0, 160)}`);
    const opener = await openers.get(one)!.chunkedResponse();
    const binary = new BinaryResponseReader();
    const reader = new StreamReader(tokens, [], () => tally.merged++);
    let status = 0;
    const take = (pieces: Uint8Array[]) => {
      for (const piece of pieces) {
        tally.reads++;
        for (const event of binary.push(piece)) {
          if ('head' in event) status = event.head.status;
          else reader.read(Buffer.from(event.content).toString('latin1'), 0);
        }
      }
    };
    for await (const chunk of response.body) take(await opener.push(chunk as Buffer));
    take([opener.end()]);
    binary.end();
    if (status !== 200) return fail(`inner status ${status}`);
    tally.checked(reader.finish());
  };
  const sent = await sendBackToBack(
    url,
    prepared,
    concurrency,
    s,
    agent,
    (response, one) => read(response, one).catch((err: Error) => fail(err.message)),
    (err) => fail(`${err.message} (${url})`),
  );
  return tally.measured(tokens, sent.seconds);
}

/** A proxy that died mid-run would turn every later phase into connection errors: stop there, with the end of its log. */
function assertRunning(dir: string, proxy: Proxy): void {
  for (const pid of proxy.pids()) {
    try {
      process.kill(pid, 0);
    } catch {
      const tail = readFileSync(join(dir, `${proxy.name}.log`), 'utf8')
        .split('\n')
        .slice(-20)
        .join('\n');
      throw new Error(`${proxy.name} (pid ${pid}) has exited; the end of its log:\n${tail}`);
    }
  }
}

async function main(): Promise<number> {
  const started = Date.now();
  const loadBefore = loadavg();
  if (loadBefore[0]! > 1.5) log(`warning: load average ${loadBefore[0]!.toFixed(1)} before the run; other processes share these cores`);
  const useWrk = wrkVersion() !== undefined;
  const dir = mkdtempSync(join(tmpdir(), 'sigil-bench-targets-'));
  pin(process.pid, LOAD_CORE);
  const engine = await startEngine(dir, CHUNK_MS, 0);
  const loader = new ForkedWorker<LoadJob, LoadResult>('load-client.ts');
  const proxies: Proxy[] = [];
  try {
    proxies.push(await startNodeHttpProxy(dir, engine));
    proxies.push({ ...(await startSigil(dir, engine, { receipts: false })), name: 'sigil' });
    proxies.push({ ...(await startSigil(dir, engine, { receipts: true })), name: 'sigil-receipts' });
    const proxyOf = (v: Variant): Proxy => proxies.find((p) => p.name === (v === 'sigil-ehbp' || v === 'sigil-clear' || v === 'sigil-ohttp' ? 'sigil' : v))!;

    /** One phase: the proxy's CPU from /proc from the moment its load starts (sealing done) to its end. */
    const measure = async (scenario: Scenario, variant: Variant, s: number, round: number): Promise<Sample> => {
      const proxy = proxyOf(variant);
      assertRunning(dir, proxy);
      let cpu0 = 0;
      let t0 = 0;
      const start = () => {
        cpu0 = cpuMicros(proxy.pids());
        t0 = performance.now();
      };
      let m: Measured;
      if (scenario.streams !== undefined) {
        const { concurrency, tokens } = scenario.streams;
        if (variant === 'sigil-ehbp') m = await sealedStreams(proxy, concurrency, tokens, s, start);
        else if (variant === 'sigil-ohttp') m = await obliviousStreams(proxy, concurrency, tokens, s, start);
        else {
          start();
          const r = await loader.run({
            kind: 'load',
            mode: 'stream',
            target: proxy.target,
            body: body(true, tokens),
            concurrency,
            durationMs: s * 1000,
            tokens,
          });
          m = {
            units: (r.streamsOk ?? 0) * tokens,
            seconds: r.seconds,
            perSecond: ((r.streamsOk ?? 0) * tokens) / r.seconds,
            errors: r.errors + r.non200,
            streamsOk: r.streamsOk ?? 0,
            streamsBad: r.streamsBad ?? 0,
            mergedReads: r.mergedReads ?? 0,
            reads: r.reads ?? 0,
            ...(r.firstProblem === undefined ? {} : { problem: r.firstProblem }),
          };
        }
      } else if (scenario.id === 'json-c50') {
        start();
        const r = await saturate(dir, proxy.target, body(false, JSON_TOKENS), JSON_CONCURRENCY, s, LOAD_CORE, useWrk);
        m = { units: r.requests - r.errors, seconds: s, perSecond: r.rps, errors: r.errors };
      } else m = await jsonBackToBack(proxy, variant, s, start);
      const cpuUs = cpuMicros(proxy.pids()) - cpu0;
      assertRunning(dir, proxy);
      const wall = (performance.now() - t0) / 1000;
      return { round, scenario: scenario.id, variant, ...m, cpuUs: cpuUs / m.units, busy: cpuUs / 1e6 / wall };
    };

    log(`warm-up (${useWrk ? 'wrk' : 'autocannon'})…`);
    // A round's worth, twice: Sigil has far more code than the floor for V8 to optimise, and a warm-up of one
    // second per phase left it measurably colder in the first rounds (JSON: 344, then 241, then 136 µs a
    // request in rounds 1 to 3, the floor 179, 96, 92).
    for (let pass = 0; pass < 2; pass++)
      for (const scenario of SCENARIOS) for (const variant of scenario.variants) await measure(scenario, variant, seconds, 0);

    const samples: Sample[] = [];
    for (let round = 1; round <= rounds; round++) {
      for (const scenario of SCENARIOS) {
        const vs = scenario.variants;
        const order = vs.map((_, i) => vs[(i + round - 1) % vs.length]!);
        log(`round ${round}/${rounds}, ${scenario.id}: ${order.join(', ')}`);
        for (const variant of order) samples.push(await measure(scenario, variant, seconds, round));
      }
    }

    const loadAfter = loadavg();
    const meta = {
      date: new Date(started).toISOString().slice(0, 16).replace('T', ' ') + ' UTC',
      command: `npx tsx bench/targets.ts${process.argv.length > 2 ? ' ' + process.argv.slice(2).join(' ') : ''}`,
      machine: describeMachine(),
      node: process.version,
      commit: sigilCommit(),
      rounds,
      seconds,
      chunkMs: CHUNK_MS,
      json: useWrk ? `wrk ${wrkVersion()}` : 'autocannon',
      pinning: hasTaskset ? `proxies on core ${PROXY_CORE}, engine and load on core ${LOAD_CORE} (taskset)` : 'not pinned (no taskset)',
      loadAverage: { before: loadBefore, after: loadAfter },
      durationS: Math.round((Date.now() - started) / 1000),
    };
    const markdown = render(meta, samples);
    mkdirSync(RESULTS, { recursive: true });
    const stem = args.quick ? 'targets-quick' : args.only !== undefined ? 'targets-partial' : 'targets';
    writeFileSync(join(RESULTS, `${stem}.md`), markdown);
    writeFileSync(join(RESULTS, `${stem}.json`), JSON.stringify({ meta, samples }, null, 2) + '\n');
    process.stdout.write(markdown);
    log(`done in ${meta.durationS} s; wrote bench/results/${stem}.md and .json`);
    return 0;
  } finally {
    for (const proxy of proxies) await proxy.stop();
    await loader.stop();
    await agent.close();
    await stopChild(engine.spawned.child);
    rmSync(dir, { recursive: true, force: true });
  }
}

interface Rule {
  scenario: string;
  variant: Variant;
  /** cpu: CPU per unit over the floor's (at most `bound`); rate: units per second over the floor's (at least `bound`). */
  metric: 'cpu' | 'rate';
  bound: number;
  what: string;
}

const RULES: Rule[] = [
  ...(['stream-100x200', 'stream-50x16'] as const).flatMap((scenario): Rule[] => [
    { scenario, variant: 'sigil', metric: 'cpu', bound: 1.25, what: 'Sigil: CPU per token event' },
    { scenario, variant: 'sigil-receipts', metric: 'cpu', bound: 1.3, what: 'Sigil, receipt on every stream: CPU per token event' },
    { scenario, variant: 'sigil-ehbp', metric: 'cpu', bound: 1.6, what: 'Sigil, EHBP: CPU per token event' },
  ]),
  { scenario: 'json-c50', variant: 'sigil', metric: 'rate', bound: 0.9, what: 'Sigil: JSON requests/s' },
  { scenario: 'json-c50', variant: 'sigil-receipts', metric: 'rate', bound: 0.75, what: 'Sigil, `X-Service-Receipt: true`: JSON requests/s' },
  { scenario: 'ehbp-json', variant: 'sigil-ehbp', metric: 'cpu', bound: 1.5, what: 'Sigil: CPU per sealed JSON request' },
];

const fmt = (v: number, digits = 0) =>
  Number.isFinite(v) ? v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : 'n/a';
const cell = (xs: number[], digits = 0) => {
  const s = spread(xs);
  return Number.isFinite(s.median) ? `${fmt(s.median, digits)} (${fmt(s.min, digits)}–${fmt(s.max, digits)})` : 'n/a';
};
const sum = (xs: (number | undefined)[]) => xs.reduce<number>((a, b) => a + (b ?? 0), 0);

/** The variant's figure over its floor's, one ratio per round. */
function ratios(samples: Sample[], scenario: Scenario, variant: Variant, metric: 'cpu' | 'rate'): number[] {
  const value = (s: Sample) => (metric === 'cpu' ? s.cpuUs : s.perSecond);
  return samples
    .filter((s) => s.scenario === scenario.id && s.variant === variant)
    .map((s) => {
      const floor = samples.find((f) => f.scenario === scenario.id && f.variant === scenario.floor && f.round === s.round);
      return floor === undefined ? Number.NaN : value(s) / value(floor);
    });
}

/** Why a variant's samples cannot carry a verdict: streams broken or requests failed, in it or in its floor. */
function broken(samples: Sample[], scenario: Scenario, variant: Variant): string | undefined {
  const mine = samples.filter((s) => s.scenario === scenario.id && (s.variant === variant || s.variant === scenario.floor));
  const bad = sum(mine.map((s) => s.streamsBad));
  const errors = sum(mine.map((s) => s.errors));
  if (bad === 0 && errors === 0) return undefined;
  const problem = mine.find((s) => s.problem !== undefined)?.problem;
  return `${bad} broken streams, ${errors} failed requests${problem === undefined ? '' : ` (first: ${problem})`}`;
}

function render(
  meta: {
    date: string;
    command: string;
    machine: string;
    node: string;
    commit: string;
    json: string;
    pinning: string;
    loadAverage: { before: number[]; after: number[] };
    durationS: number;
  },
  samples: Sample[],
): string {
  const la = (xs: number[]) => xs.map((x) => x.toFixed(2)).join(' / ');
  const out: string[] = [
    `# The performance targets in one run`,
    '',
    `Run ${meta.date} (\`${meta.command}\`, ${meta.durationS} s) on ${meta.machine}; Node ${meta.node}; Sigil at ${meta.commit}.`,
    `${rounds} interleaved rounds of ${seconds} s per peer and scenario, the order rotated each round; ${meta.pinning}; engine cadence ${CHUNK_MS} ms between stream events; JSON load ${meta.json}.`,
    `Load average (1 / 5 / 15 min): ${la(meta.loadAverage.before)} before, ${la(meta.loadAverage.after)} after.`,
    'CPU is the proxy process\'s user + system time (/proc) per unit delivered whole; cells are medians over rounds (min–max); "× floor" is the median of the ratios taken within each round. Proxy busy: its CPU time over wall time (1.00: its core was full). Reported, not asserted by any test.',
    '',
    '| scenario | peer | units/s | CPU µs/unit | CPU × floor | units/s × floor | proxy busy | streams whole / broken | reads with >1 token event |',
    '|---|---|---|---|---|---|---|---|---|',
  ];
  for (const scenario of SCENARIOS) {
    for (const variant of scenario.variants) {
      const mine = samples.filter((s) => s.scenario === scenario.id && s.variant === variant);
      const streams = scenario.streams === undefined ? '' : `${fmt(sum(mine.map((s) => s.streamsOk)))} / ${fmt(sum(mine.map((s) => s.streamsBad)))}`;
      const merged = scenario.streams === undefined ? '' : `${fmt(sum(mine.map((s) => s.mergedReads)))} of ${fmt(sum(mine.map((s) => s.reads)))}`;
      out.push(
        `| ${scenario.label} (per ${scenario.unit}) | ${LABELS[variant]} | ${cell(mine.map((s) => s.perSecond))} | ${cell(
          mine.map((s) => s.cpuUs),
          1,
        )} | ${cell(ratios(samples, scenario, variant, 'cpu'), 2)} | ${cell(ratios(samples, scenario, variant, 'rate'), 2)} | ${cell(
          mine.map((s) => s.busy),
          2,
        )} | ${streams} | ${merged} |`,
      );
    }
  }
  out.push(
    '',
    'Measured: the median of the per-round ratios, to three decimals (the figure the verdict is taken on), with their min–max. A row whose streams broke or whose requests failed, in it or in its floor, is not a yes.',
    '',
    '| target | measured | holds |',
    '|---|---|---|',
  );
  for (const rule of RULES) {
    const scenario = SCENARIOS.find((s) => s.id === rule.scenario);
    if (scenario === undefined) continue;
    const r = spread(ratios(samples, scenario, rule.variant, rule.metric));
    const meets = rule.metric === 'cpu' ? r.median <= rule.bound : r.median >= rule.bound;
    const why = broken(samples, scenario, rule.variant);
    const verdict = why !== undefined ? `**no**: ${why}` : Number.isNaN(r.median) ? '**no**: not measured' : meets ? 'yes' : '**no**';
    out.push(
      `| ${rule.what} ${rule.metric === 'cpu' ? '≤' : '≥'} ${rule.bound}× ${LABELS[scenario.floor]}, ${scenario.label} | ${fmt(r.median, 3)}× (${fmt(r.min, 2)}–${fmt(r.max, 2)}) | ${verdict} |`,
    );
  }
  out.push(
    '',
    'Every sample:',
    '',
    '| round | scenario | peer | units | s | CPU µs/unit | busy | units/s | errors | streams whole / broken | reads >1 event / reads | first problem |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
  );
  for (const s of samples)
    out.push(
      `| ${s.round} | ${s.scenario} | ${s.variant} | ${s.units} | ${fmt(s.seconds, 1)} | ${fmt(s.cpuUs, 1)} | ${fmt(s.busy, 2)} | ${fmt(s.perSecond)} | ${s.errors} | ${s.streamsOk === undefined ? '' : `${s.streamsOk} / ${s.streamsBad}`} | ${s.reads === undefined ? '' : `${s.mergedReads} / ${s.reads}`} | ${s.problem ?? ''} |`,
    );
  return out.join('\n') + '\n';
}

runBenchmark(main, log);
