/**
 * A/B of Sigil's hot paths before a change lands: Sigil at a git revision against the working tree
 * (or a second revision), both built and run side by side on the same engine, in interleaved rounds
 * (the order alternates every round, so drift of a shared machine hits both alike). Reported per path:
 * the proxy's CPU µs per unit of work (the figure least disturbed by other work) and throughput, as
 * B/A ratios.
 *
 *   npx tsx bench/ab.ts [--base main] [--head REV] [--paths json,stream,receipt,stream-receipt,ehbp] [--rounds 5] [--seconds 3] [--max-stored N]
 *                       [--base-node PATH] [--head-node PATH] [--head-log] [--workers N]
 *
 * --base-node and --head-node run a side on another node binary (default: the one running this script), so a change of
 * runtime is measured like a change of code: `--base ecba9fb --base-node /usr/bin/node` is the old main on Node 20.
 * --head-log turns on the transparency log (docs/log.md) in B's Sigils only: with --base HEAD and the working tree
 * as B, the same code with and without the log.
 * --workers N runs each Sigil as a primary and N workers (default 1: one process), all on the proxy core; CPU is then
 * the whole process tree's, the primary's included (with the log, its sequencer and the workers' appends).
 *
 * Paths: json (wrk or autocannon, c=50, CPU per request), stream (50 concurrent streams of 16 token
 * events from bench/load-client.ts, CPU per token event), receipt (json with `X-Service-Receipt: true`,
 * on a second Sigil process so its receipt store cannot weigh on the others), stream-receipt (stream with
 * `X-Service-Receipt: true`, on that second process: two receipts a stream), ehbp (JSON requests sealed
 * with the npm `ehbp` client, c=8, CPU per request; the client's sealing is not counted).
 *
 * Each revision is exported with `git archive` to a temporary directory, given node_modules (hard links
 * to this tree's when its package-lock.json is the same, else `npm ci --ignore-scripts --prefer-offline`)
 * and built with its own `npm run build`; the working tree is built in place.
 */
import { execSync, fork, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Agent } from 'undici';
import { fetchServerIdentity, sealBatch, sendBackToBack } from './ehbp-client.ts';
import type { LoadResult, Target } from './load-client.ts';
import { LOAD_CORE, PROXY_CORE, ROOT, startEngine, writeSigilConfig } from './peers.ts';
import { childPids, cpuMicros, freePort, hasTaskset, killAllStarted, pin, spawnLogged, stopChild, waitForPort, type Spawned } from './processes.ts';
import { spread } from './stats.ts';
import { saturate, wrkVersion } from './wrk.ts';

const PATHS = ['json', 'stream', 'receipt', 'stream-receipt', 'ehbp'] as const;
type Path = (typeof PATHS)[number];
const UNIT: Record<Path, string> = { json: 'request', stream: 'token event', receipt: 'request', 'stream-receipt': 'token event', ehbp: 'request' };
const STREAM_TOKENS = 16;
const EHBP_CONCURRENCY = 8;

const { values } = parseArgs({
  options: {
    base: { type: 'string', default: 'main' },
    head: { type: 'string' },
    paths: { type: 'string', default: PATHS.join(',') },
    rounds: { type: 'string', default: '5' },
    seconds: { type: 'string', default: '3' },
    'max-stored': { type: 'string' },
    'base-node': { type: 'string', default: process.execPath },
    'head-node': { type: 'string', default: process.execPath },
    'head-log': { type: 'boolean', default: false },
    workers: { type: 'string', default: '1' },
  },
});
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const paths = values.paths.split(',').map((p) => {
  if (!(PATHS as readonly string[]).includes(p)) throw new Error(`--paths: unknown path ${p} (known: ${PATHS.join(', ')})`);
  return p as Path;
});

const dir = mkdtempSync(join(tmpdir(), 'sigil-ab-'));
const log = (msg: string) => process.stderr.write(`ab: ${msg}\n`);

/** Runs a command to its end, its output to `logFile`; `reason` is the first line npm or tsc gives for a failure. */
function run(command: string, args: string[], cwd: string, logFile: string): { ok: boolean; reason: string } {
  const r = spawnSync(command, args, { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  const out = `${r.stdout ?? ''}${r.stderr ?? ''}`;
  writeFileSync(logFile, out);
  const lines = out.split('\n').filter((l) => /\S/.test(l.replace(/^npm error\s*/, '')) && !l.startsWith('npm error code'));
  return { ok: r.status === 0, reason: (lines.find((l) => /error/i.test(l)) ?? lines.at(-1) ?? '').slice(0, 240) };
}

/** node_modules for an exported revision; says how it got them. */
function provideModules(root: string): string {
  if (readFileSync(join(root, 'package-lock.json')).equals(readFileSync(join(ROOT, 'package-lock.json')))) {
    execSync(`cp -al ${JSON.stringify(join(ROOT, 'node_modules'))} ${JSON.stringify(join(root, 'node_modules'))}`);
    return "hard links to this tree's node_modules (same package-lock.json)";
  }
  const ci = run('npm', ['ci', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund'], root, join(root, 'npm-ci.log'));
  if (ci.ok) return 'npm ci --ignore-scripts --prefer-offline (its own package-lock.json)';
  // A revision whose lock file npm ci refuses (out of step with its package.json) still runs on this tree's packages.
  rmSync(join(root, 'node_modules'), { recursive: true, force: true });
  execSync(`cp -al ${JSON.stringify(join(ROOT, 'node_modules'))} ${JSON.stringify(join(root, 'node_modules'))}`);
  return `npm ci failed: ${ci.reason}; so this tree's node_modules (hard links), whose dependency versions may differ`;
}

function build(root: string, name: string): void {
  const built = run('npm', ['run', 'build'], root, join(dir, `${name}-build.log`));
  if (!built.ok) throw new Error(`npm run build failed for ${name}: ${built.reason} (log: ${join(dir, `${name}-build.log`)})`);
}

function prepareRevision(rev: string, name: string): { root: string; label: string } {
  const root = join(dir, name);
  mkdirSync(root);
  const commit = execSync(`git rev-parse --short ${rev}`, { cwd: ROOT, encoding: 'utf8' }).trim();
  execSync(`git archive ${commit} | tar -x -C ${JSON.stringify(root)}`, { cwd: ROOT });
  log(`${name} ${rev} (${commit}): node_modules by ${provideModules(root)}`);
  build(root, name);
  return { root, label: `${rev} (${commit})` };
}

interface Sigil {
  spawned: Spawned;
  target: Target;
}

/** One Sigil process on the proxy core (started under taskset, so a Sigil that sizes itself to the cores it may use sees one). */
async function startSigilFrom(root: string, name: string, enginePort: number, receipts: boolean, node: string): Promise<Sigil> {
  const port = await freePort();
  // A revision from before `workers` existed refuses the key (its config is strict): it runs one process anyway.
  const knowsWorkers = readFileSync(join(root, 'src', 'config', 'schema.ts'), 'utf8').includes('workers:');
  const extra = {
    ...(values['max-stored'] ? { receipts: { max_stored: Number(values['max-stored']) } } : {}),
    ...(values['head-log'] && name.startsWith('b-') ? { transparency_log: { dir: join(dir, name, 'tlog') } } : {}),
    workers: knowsWorkers ? Number(values.workers) : undefined,
  };
  const { config, key } = writeSigilConfig(join(dir, name), enginePort, port, 'warn', extra);
  const command = [node, join(root, 'bin', 'sigil.js'), 'serve', '--config', config];
  const [bin, ...args] = hasTaskset ? ['taskset', '-c', String(PROXY_CORE), ...command] : command;
  const spawned = spawnLogged(bin!, args, join(dir, `${name}.log`), { cwd: root });
  await waitForPort(port, 60_000, spawned.child);
  for (const pid of [spawned.pid, ...childPids(spawned.pid)]) pin(pid, PROXY_CORE);
  const headers: Record<string, string> = { 'content-type': 'application/json', authorization: `Bearer ${key}` };
  if (receipts) headers['x-service-receipt'] = 'true';
  return { spawned, target: { host: '127.0.0.1', port, path: '/v1/chat/completions', headers } };
}

interface Side {
  label: string;
  plain: Sigil;
  receipts: Sigil;
}

const prompt = [{ role: 'user', content: 'Say hello in one short sentence, please.' }];
const json = JSON.stringify({ model: 'bench-model', messages: prompt, max_tokens: 16 });
const stream = JSON.stringify({ model: 'bench-model', messages: prompt, max_tokens: STREAM_TOKENS, stream: true });
const useWrk = wrkVersion() !== undefined;
const agent = new Agent({ connections: EHBP_CONCURRENCY * 2 });

async function ehbpLoad(target: Target, s: number): Promise<{ units: number; perSecond: number }> {
  const base = `http://${target.host}:${target.port}`;
  const url = `${base}${target.path}`;
  const sealed = await sealBatch(await fetchServerIdentity(base, agent), url, target.headers, json, Math.max(200, Math.round(s * 600)));
  const sent = await sendBackToBack(url, sealed, EHBP_CONCURRENCY, s, agent, async (response) => {
    await response.body.arrayBuffer();
    if (response.statusCode !== 200) throw new Error(`EHBP request answered ${response.statusCode}`);
  });
  return { units: sent.sent, perSecond: sent.sent / sent.seconds };
}

pin(process.pid, LOAD_CORE);
const started: Side[] = [];
const engine = await startEngine(dir, 5, 0);
const loader = fork(join(ROOT, 'bench', 'load-client.ts'), [], { execArgv: ['--import', 'tsx'] });
try {
  if (loader.pid !== undefined) pin(loader.pid, LOAD_CORE);
  const streamLoad = (target: Target, s: number) =>
    new Promise<LoadResult>((resolve, reject) => {
      loader.once('message', (m: { type: string; result?: LoadResult; message?: string }) => (m.result ? resolve(m.result) : reject(new Error(m.message))));
      loader.send({ kind: 'load', mode: 'stream', target, body: stream, concurrency: 50, durationMs: s * 1000, tokens: STREAM_TOKENS });
    });

  /** Runs one path against one side; returns its units of work and units per second. */
  const load = async (side: Side, path: Path, s: number): Promise<{ units: number; perSecond: number; pid: number }> => {
    if (path === 'receipt') {
      const r = await saturate(dir, side.receipts.target, json, 50, s, LOAD_CORE, useWrk);
      return { units: r.requests, perSecond: r.rps, pid: side.receipts.spawned.pid };
    }
    if (path === 'stream-receipt') {
      const r = await streamLoad(side.receipts.target, s);
      return { units: r.requests * STREAM_TOKENS, perSecond: (r.requests * STREAM_TOKENS) / r.seconds, pid: side.receipts.spawned.pid };
    }
    const pid = side.plain.spawned.pid;
    if (path === 'json') {
      const r = await saturate(dir, side.plain.target, json, 50, s, LOAD_CORE, useWrk);
      return { units: r.requests, perSecond: r.rps, pid };
    }
    if (path === 'stream') {
      const r = await streamLoad(side.plain.target, s);
      return { units: r.requests * STREAM_TOKENS, perSecond: (r.requests * STREAM_TOKENS) / r.seconds, pid };
    }
    return { ...(await ehbpLoad(side.plain.target, s)), pid };
  };

  const base = prepareRevision(values.base, 'base');
  let head: { root: string; label: string };
  if (values.head === undefined) {
    build(ROOT, 'working-tree');
    head = { root: ROOT, label: 'working tree' };
  } else head = prepareRevision(values.head, 'head');
  const nodeVersion = (node: string) => execSync(`${JSON.stringify(node)} --version`, { encoding: 'utf8' }).trim();
  for (const [name, side, node] of [
    ['a', base, values['base-node']],
    ['b', head, values['head-node']],
  ] as const) {
    const label = `${side.label} on Node ${nodeVersion(node)}`;
    started.push({
      label,
      plain: await startSigilFrom(side.root, `${name}-plain`, engine.port, false, node),
      receipts: await startSigilFrom(side.root, `${name}-receipts`, engine.port, true, node),
    });
  }
  log(`warming up (${useWrk ? 'wrk' : 'autocannon'})`);
  for (const side of started) for (const path of paths) await load(side, path, 1);

  const cpu = new Map<string, number[]>();
  const rate = new Map<string, number[]>();
  const ratios = new Map<Path, number[]>();
  const push = (m: Map<string, number[]>, k: string, v: number) => m.set(k, [...(m.get(k) ?? []), v]);
  for (let r = 0; r < rounds; r++) {
    for (const path of paths) {
      const order = r % 2 === 0 ? started : [...started].reverse();
      const perUnit = new Map<Side, number>();
      for (const side of order) {
        const pid = path === 'receipt' || path === 'stream-receipt' ? side.receipts.spawned.pid : side.plain.spawned.pid;
        // With workers: the primary and its workers (a worker that died and was replaced would show as a missing share).
        const tree = [pid, ...childPids(pid)];
        const before = cpuMicros(tree);
        const result = await load(side, path, seconds);
        const used = (cpuMicros(tree) - before) / result.units;
        perUnit.set(side, used);
        push(cpu, `${started.indexOf(side)}/${path}`, used);
        push(rate, `${started.indexOf(side)}/${path}`, result.perSecond);
      }
      ratios.set(path, [...(ratios.get(path) ?? []), perUnit.get(started[1]!)! / perUnit.get(started[0]!)!]);
    }
    log(`round ${r + 1}/${rounds}`);
  }

  const [a, b] = started as [Side, Side];
  const out: string[] = [];
  out.push(
    `A = ${a.label}, B = ${b.label}; ${rounds} interleaved rounds of ${seconds} s per path; ${values.workers === '1' ? 'one Sigil process' : `Sigil as a primary and ${values.workers} workers`}${values['head-log'] ? ', B with the transparency log' : ''}; Sigil pinned to core ${PROXY_CORE}, load to core ${LOAD_CORE}${hasTaskset ? '' : ' (no taskset: not pinned)'}.`,
  );
  out.push(
    'CPU is the Sigil process\'s user + system time (/proc) per unit; cells are medians over rounds (min–max); "B/A per round" is the median of the ratios taken within each round.',
  );
  out.push('');
  out.push('| path | unit | A CPU µs/unit | B CPU µs/unit | B/A CPU, per round | A units/s | B units/s | B/A units/s |');
  out.push('|---|---|---|---|---|---|---|---|');
  const cell = (xs: number[], digits: number) => {
    const s = spread(xs);
    return `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`;
  };
  for (const path of paths) {
    const ca = cpu.get(`0/${path}`)!;
    const cb = cpu.get(`1/${path}`)!;
    const ra = rate.get(`0/${path}`)!;
    const rb = rate.get(`1/${path}`)!;
    out.push(
      `| ${path} | ${UNIT[path]} | ${cell(ca, 1)} | ${cell(cb, 1)} | **${spread(ratios.get(path)!).median.toFixed(2)}** (${spread(ratios.get(path)!).min.toFixed(2)}–${spread(ratios.get(path)!).max.toFixed(2)}) | ${cell(ra, 0)} | ${cell(rb, 0)} | ${(spread(rb).median / spread(ra).median).toFixed(2)} |`,
    );
  }
  process.stdout.write(`${out.join('\n')}\n`);
} finally {
  for (const side of started) for (const s of [side.plain, side.receipts]) await stopChild(s.spawned.child, 'SIGINT');
  loader.kill();
  await agent.close();
  await stopChild(engine.spawned.child);
  killAllStarted();
  rmSync(dir, { recursive: true, force: true });
}
