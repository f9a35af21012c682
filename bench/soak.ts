/**
 * Soak test: `npm run soak [-- --seconds 60 --concurrency 32 --settle 10]`.
 *
 * Starts two fake engines in this process (one healthy, one that always fails with 500) and Sigil as
 * a separate process (`node bin/sigil.js serve`), then runs a bounded, loopback-only mixed load:
 * JSON completions, streams (some with receipts), streams the client aborts mid-way, bad requests,
 * wrong keys and requests for the failing engine. It prints requests and errors by kind and status,
 * and Sigil's RSS and sockets at start, at the end of the load and after a settle period.
 *
 * Exits non-zero when Sigil answered any 5xx of its own (a 502 counts only for the failing engine),
 * when any answer was not the expected one, or when growth is left after the load (RSS beyond the
 * tolerance, more sockets than at start, streams still active).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import { stringify } from 'yaml';
import { startTestEngine, type TestEngine } from '../test/support/test-engine.ts';
import { snapshot, type ResourceSnapshot } from './soak-resources.ts';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '60' },
    concurrency: { type: 'string', default: '32' },
    settle: { type: 'string', default: '10' },
    'rss-tolerance-mb': { type: 'string', default: '64' },
    seed: { type: 'string', default: '6' },
  },
});
const SECONDS = Number(values.seconds);
const CONCURRENCY = Number(values.concurrency);
const SETTLE_S = Number(values.settle);
const RSS_TOLERANCE_MB = Number(values['rss-tolerance-mb']);
const MAX_BODY = 64 * 1024;
const ROOT = new URL('..', import.meta.url).pathname;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Deterministic choice of request kinds, so two runs send the same mix. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Kind = 'json' | 'stream' | 'stream_receipt' | 'stream_aborted' | 'bad_request' | 'wrong_key' | 'engine_failure';
const MIX: Array<[Kind, number]> = [
  ['json', 25],
  ['stream', 20],
  ['stream_receipt', 10],
  ['stream_aborted', 15],
  ['bad_request', 15],
  ['wrong_key', 10],
  ['engine_failure', 5],
];

interface Outcome {
  kind: Kind;
  status: number;
  ok: boolean;
  /** What was wrong, when not ok. */
  problem?: string;
  ms: number;
}

interface Sigil {
  child: ChildProcess;
  url: string;
  key: string;
  stdoutLines: number;
  stderr: string[];
}

function writeConfig(dir: string, healthy: TestEngine, failing: TestEngine): string {
  const models = [
    { id: 'soak-model', upstream: 'healthy', upstream_model: 'soak-model' },
    { id: 'soak-renamed', upstream: 'healthy', upstream_model: 'engine/soak-renamed' },
    { id: 'soak-failing', upstream: 'failing', upstream_model: 'soak-failing' },
  ].map((m, i) => ({
    ...m,
    name: m.id,
    provider: 'soak',
    created: 1_700_000_000 + i,
    context_window: 8192,
    reasoning: false,
    regions: ['local'],
    pricing: { input_per_mtok: 1, output_per_mtok: 1, currency: 'USD' },
    model_hash:
      'sha256:' +
      String(i + 1)
        .padStart(2, '0')
        .repeat(32),
  }));
  writeFileSync(join(dir, 'models.yaml'), stringify({ models }));
  const config = {
    listen: { host: '127.0.0.1', port: 0 },
    upstreams: {
      healthy: { url: healthy.baseUrl, timeout_ms: 10_000, idle_timeout_ms: 10_000 },
      failing: { url: failing.baseUrl, timeout_ms: 10_000, idle_timeout_ms: 10_000 },
    },
    catalogue: join(dir, 'models.yaml'),
    auth: { keys_file: join(dir, 'api-keys') },
    limits: { max_body_bytes: MAX_BODY, max_concurrent: 4096, max_concurrent_per_key: 4096 },
    log: { level: 'info' },
  };
  const file = join(dir, 'sigil.yaml');
  writeFileSync(file, stringify(config));
  return file;
}

async function startSigilProcess(configFile: string): Promise<Sigil> {
  const add = spawnSync(process.execPath, [join(ROOT, 'bin/sigil.js'), 'keys', 'add', '--config', configFile, '--label', 'soak'], { encoding: 'utf8' });
  if (add.status !== 0) throw new Error(`sigil keys add failed: ${add.stderr}`);
  const key = add.stdout.trim();
  const child = spawn(process.execPath, [join(ROOT, 'bin/sigil.js'), 'serve', '--config', configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
  const sigil: Sigil = { child, url: '', key, stdoutLines: 0, stderr: [] };
  child.stderr!.setEncoding('utf8').on('data', (text: string) => sigil.stderr.push(...text.split('\n').filter(Boolean).slice(-20)));
  let pending = '';
  const listening = new Promise<string>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`sigil exited with ${code} before listening: ${sigil.stderr.slice(-5).join('\n')}`)));
    child.stdout!.setEncoding('utf8').on('data', (text: string) => {
      const lines = (pending + text).split('\n');
      pending = lines.pop()!;
      sigil.stdoutLines += lines.length;
      for (const line of lines) {
        if (!line.includes('"sigil listening"')) continue;
        resolve((JSON.parse(line) as { url: string }).url);
      }
    });
  });
  sigil.url = await Promise.race([listening, sleep(30_000).then(() => Promise.reject(new Error('sigil did not start within 30 s')))]);
  return sigil;
}

/** The mixed load: one request of the given kind, checked against what a client must get. */
async function oneRequest(kind: Kind, sigil: Sigil, agent: Agent, seq: number): Promise<Outcome> {
  const started = performance.now();
  const chat = (body: unknown, headers: Record<string, string> = {}) =>
    request(`${sigil.url}/v1/chat/completions`, {
      method: 'POST',
      dispatcher: agent,
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  const messages = [{ role: 'user', content: `soak request ${seq}` }];
  const done = (status: number, problem?: string): Outcome => ({
    kind,
    status,
    ok: problem === undefined,
    ms: performance.now() - started,
    ...(problem === undefined ? {} : { problem }),
  });
  const expectStatus = async (res: Awaited<ReturnType<typeof chat>>, want: number) => {
    const text = await res.body.text();
    if (res.statusCode !== want) return done(res.statusCode, `expected ${want}, got ${res.statusCode}: ${text.slice(0, 120)}`);
    if (want >= 400 && !/^\{"error":\{"message":/.test(text)) return done(res.statusCode, `not an OpenAI error: ${text.slice(0, 120)}`);
    return done(res.statusCode);
  };

  switch (kind) {
    case 'json': {
      const res = await chat({ model: seq % 2 === 0 ? 'soak-model' : 'soak-renamed', messages });
      const text = await res.body.text();
      if (res.statusCode !== 200) return done(res.statusCode, `expected 200, got ${res.statusCode}: ${text.slice(0, 120)}`);
      const parsed = JSON.parse(text) as { choices?: unknown[] };
      return done(200, Array.isArray(parsed.choices) ? undefined : 'no choices');
    }
    case 'stream':
    case 'stream_receipt': {
      const receipt = kind === 'stream_receipt';
      const res = await chat(
        { model: seq % 2 === 0 ? 'soak-model' : 'soak-renamed', messages, stream: true },
        receipt ? { 'x-service-receipt': 'true', 'x-service-nonce': `soak-${seq}` } : {},
      );
      const text = await res.body.text();
      if (res.statusCode !== 200) return done(res.statusCode, `expected 200, got ${res.statusCode}`);
      const end = receipt ? /data: \[DONE\]\n\n: receipt [\w-]+\.[\w-]+\.[\w-]+\n\n$/ : /data: \[DONE\]\n\n$/;
      return done(200, end.test(text) ? undefined : `stream did not end as expected: ...${text.slice(-80)}`);
    }
    case 'stream_aborted': {
      const res = await chat({ model: 'soak-model', messages, stream: true });
      if (res.statusCode !== 200) return done(res.statusCode, `expected 200, got ${res.statusCode}`);
      for await (const _chunk of res.body) break;
      res.body.destroy();
      return done(200);
    }
    case 'bad_request': {
      switch (seq % 5) {
        case 0:
          return expectStatus(await chat('{"model":"soak-model","messages":['), 400);
        case 1:
          return expectStatus(await chat({ model: 'no-such-model', messages }), 404);
        case 2:
          return expectStatus(await chat({ model: 'soak-model', messages, temperature: 7 }), 400);
        case 3:
          return expectStatus(await chat({ model: 'soak-model', messages }, { 'content-type': 'text/plain' }), 415);
        default:
          return expectStatus(await chat({ model: 'soak-model', messages: [{ role: 'user', content: 'x'.repeat(MAX_BODY) }] }), 413);
      }
    }
    case 'wrong_key': {
      const wrong = sigil.key.slice(0, -6) + (sigil.key.endsWith('AAAAAA') ? 'BBBBBB' : 'AAAAAA');
      return expectStatus(await chat({ model: 'soak-model', messages }, { authorization: `Bearer ${wrong}` }), 401);
    }
    case 'engine_failure':
      return expectStatus(await chat({ model: 'soak-failing', messages }), 502);
  }
}

async function runLoad(sigil: Sigil, seconds: number, concurrency: number, seed: number, onSample: () => void): Promise<Outcome[]> {
  const random = mulberry32(seed);
  const total = MIX.reduce((n, [, w]) => n + w, 0);
  const pick = (): Kind => {
    let r = random() * total;
    for (const [kind, weight] of MIX) if ((r -= weight) < 0) return kind;
    return 'json';
  };
  const agent = new Agent({ connections: concurrency, keepAliveTimeout: 4_000 });
  const outcomes: Outcome[] = [];
  const deadline = Date.now() + seconds * 1000;
  let seq = 0;
  const sampler = setInterval(onSample, 5_000);
  const worker = async () => {
    while (Date.now() < deadline) {
      const kind = pick();
      const n = seq++;
      const started = performance.now();
      try {
        outcomes.push(await oneRequest(kind, sigil, agent, n));
      } catch (err) {
        outcomes.push({ kind, status: 0, ok: false, problem: `transport: ${(err as Error).message}`, ms: performance.now() - started });
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  clearInterval(sampler);
  await agent.close();
  return outcomes;
}

/** Reads `sigil_active_streams` from /metrics on a connection of its own, closed before returning. */
async function activeStreams(url: string): Promise<number | undefined> {
  const agent = new Agent();
  try {
    const res = await request(`${url}/metrics`, { dispatcher: agent });
    const text = await res.body.text();
    if (res.statusCode !== 200) return undefined;
    const match = /^sigil_active_streams(?:\{[^}]*\})? (\d+(?:\.\d+)?)$/m.exec(text);
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  } finally {
    await agent.close();
  }
}

const percentile = (sorted: number[], p: number) => (sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!);

function report(
  outcomes: Outcome[],
  snapshots: ResourceSnapshot[],
  samples: ResourceSnapshot[],
  seconds: number,
  concurrency: number,
  streamsLeft: number | undefined,
  engineAborts: number,
): string[] {
  const failures: string[] = [];
  const out: string[] = [];
  out.push(`Sigil soak: ${seconds} s, concurrency ${concurrency}, ${outcomes.length} requests (${(outcomes.length / seconds).toFixed(0)}/s)`);
  out.push('');
  out.push('| kind | requests | statuses | unexpected | p50 ms | p99 ms |');
  out.push('|---|---:|---|---:|---:|---:|');
  for (const [kind] of MIX) {
    const mine = outcomes.filter((o) => o.kind === kind);
    const statuses = new Map<number, number>();
    for (const o of mine) statuses.set(o.status, (statuses.get(o.status) ?? 0) + 1);
    const ms = mine.map((o) => o.ms).sort((a, b) => a - b);
    const bad = mine.filter((o) => !o.ok).length;
    out.push(
      `| ${kind} | ${mine.length} | ${[...statuses]
        .sort((a, b) => a[0] - b[0])
        .map(([s, n]) => `${s}: ${n}`)
        .join(', ')} | ${bad} | ${percentile(ms, 50).toFixed(1)} | ${percentile(ms, 99).toFixed(1)} |`,
    );
  }
  out.push('');
  const sigil5xx = outcomes.filter((o) => o.status >= 500 && !(o.kind === 'engine_failure' && o.status === 502));
  const unexpected = outcomes.filter((o) => !o.ok);
  out.push(
    `5xx from Sigil itself: ${sigil5xx.length}; 502 for the failing engine (expected): ${outcomes.filter((o) => o.kind === 'engine_failure' && o.status === 502).length}; unexpected answers: ${unexpected.length}; engine requests cancelled by client aborts: ${engineAborts}`,
  );
  const problems = new Map<string, number>();
  for (const o of unexpected) problems.set(`${o.kind}: ${o.problem}`, (problems.get(`${o.kind}: ${o.problem}`) ?? 0) + 1);
  for (const [p, n] of [...problems].slice(0, 10)) out.push(`  ${n} x ${p}`);
  out.push('');
  out.push('| moment | RSS MB | socket fds | established | closing |');
  out.push('|---|---:|---:|---:|---:|');
  for (const s of [...snapshots.slice(0, 1), ...samples, ...snapshots.slice(1)])
    out.push(`| ${s.label} | ${s.rssMb} | ${s.socketFds} | ${s.established} | ${s.closing} |`);
  out.push('');
  out.push(`Active streams after settle (/metrics): ${streamsLeft ?? 'n/a'}`);

  const [start, , settled] = snapshots as [ResourceSnapshot, ResourceSnapshot, ResourceSnapshot];
  if (outcomes.length === 0) failures.push('no request was made');
  if (sigil5xx.length > 0) failures.push(`${sigil5xx.length} 5xx answers from Sigil itself`);
  if (unexpected.length > 0) failures.push(`${unexpected.length} unexpected answers`);
  if (settled.rssMb > start.rssMb + RSS_TOLERANCE_MB)
    failures.push(`RSS after settle ${settled.rssMb} MB is more than ${RSS_TOLERANCE_MB} MB over the start (${start.rssMb} MB)`);
  if (settled.socketFds > start.socketFds) failures.push(`sockets after settle (${settled.socketFds}) above the start (${start.socketFds})`);
  if (settled.established > start.established)
    failures.push(`established connections after settle (${settled.established}) above the start (${start.established})`);
  if (streamsLeft !== undefined && streamsLeft !== 0) failures.push(`${streamsLeft} streams still active after settle`);
  out.push('');
  out.push(failures.length === 0 ? 'PASS: zero 5xx from Sigil, every answer as expected, no growth left after the load.' : `FAIL: ${failures.join('; ')}`);
  return out;
}

async function main(): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'sigil-soak-'));
  const healthy = await startTestEngine({ modelNames: ['soak-model', 'engine/soak-renamed'], contextWindow: 1_000_000 });
  healthy.behaviour = { chunkDelayMs: 2 };
  const failing = await startTestEngine({ modelNames: ['soak-failing'] });
  failing.behaviour = { status: 500 };
  let sigil: Sigil | undefined;
  try {
    sigil = await startSigilProcess(writeConfig(dir, healthy, failing));
    const pid = sigil.child.pid!;
    process.stderr.write(`soak: sigil pid ${pid} at ${sigil.url}; ${SECONDS} s at concurrency ${CONCURRENCY}, then ${SETTLE_S} s settle\n`);
    // Let the start-up engine check's keep-alive connection expire, so the baseline is idle Sigil.
    await sleep(6_000);
    const snapshots = [snapshot(pid, 'start (idle)')];
    const samples: ResourceSnapshot[] = [];
    const loadStarted = Date.now();
    const outcomes = await runLoad(sigil, SECONDS, CONCURRENCY, Number(values.seed), () =>
      samples.push(snapshot(pid, `load t+${Math.round((Date.now() - loadStarted) / 1000)} s`)),
    );
    snapshots.push(snapshot(pid, 'end of load'));
    await sleep(SETTLE_S * 1000);
    snapshots.push(snapshot(pid, `after ${SETTLE_S} s settle`));
    const streamsLeft = await activeStreams(sigil.url);
    const lines = report(outcomes, snapshots, samples, SECONDS, CONCURRENCY, streamsLeft, healthy.aborted);
    process.stdout.write(lines.join('\n') + '\n');
    return lines.at(-1)!.startsWith('PASS') ? 0 : 1;
  } finally {
    if (sigil !== undefined && sigil.child.exitCode === null) {
      const exited = new Promise((r) => sigil!.child.once('exit', r));
      sigil.child.kill('SIGTERM');
      await Promise.race([exited, sleep(10_000)]);
      if (sigil.child.exitCode === null) sigil.child.kill('SIGKILL');
    }
    await healthy.close();
    await failing.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

process.exitCode = await main();
