/**
 * A/B of Sigil's hot path: Sigil at a git revision (exported with `git archive`, sharing node_modules)
 * against the working tree, interleaved round by round on the same engine, comparing the proxy's CPU
 * µs per request (the figure least disturbed by other work on a shared machine) and req/s.
 *
 *   npx tsx bench/ab.ts --base HEAD~1 [--head REV] [--mode json|stream] [--rounds 8] [--seconds 3] [--max-stored N]
 *
 * --mode stream: 50 concurrent streams of 16 tokens (5 ms apart) from bench/load-client.ts; CPU per stream.
 *
 * Without --head the B side is the working tree.
 */
import { execSync, fork } from 'node:child_process';
import type { LoadResult } from './load-client.ts';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { LOAD_CORE, PROXY_CORE, ROOT, startEngine, writeSigilConfig, type Peer } from './peers.ts';
import { cpuMicros, freePort, killAllStarted, pin, spawnLogged, stopChild, waitForPort } from './processes.ts';
import { spread } from './stats.ts';
import { saturate, wrkVersion } from './wrk.ts';

const { values } = parseArgs({ options: { base: { type: 'string', default: 'HEAD' }, head: { type: 'string' }, mode: { type: 'string', default: 'json' }, rounds: { type: 'string', default: '8' }, seconds: { type: 'string', default: '3' }, 'max-stored': { type: 'string' } } });
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);

async function startSigilFrom(root: string, dir: string, enginePort: number, name: string, receipts: boolean): Promise<Peer> {
  const port = await freePort();
  const { config, key } = writeSigilConfig(join(dir, name), enginePort, port, 'warn', values['max-stored'] ? { receipts: { max_stored: Number(values['max-stored']) } } : {});
  const spawned = spawnLogged(process.execPath, [join(root, 'bin', 'sigil.js'), 'serve', '--config', config], join(dir, `${name}.log`), { cwd: root });
  await waitForPort(port, 30_000, spawned.child);
  pin(spawned.pid, PROXY_CORE);
  const headers: Record<string, string> = { 'content-type': 'application/json', authorization: `Bearer ${key}` };
  if (receipts) headers['x-service-receipt'] = 'true';
  return { name: 'sigil', target: { host: '127.0.0.1', port, path: '/v1/chat/completions', headers }, pids: () => [spawned.pid], stop: () => stopChild(spawned.child, 'SIGINT') };
}

const dir = mkdtempSync(join(tmpdir(), 'sigil-ab-'));
function exportRevision(rev: string, name: string): string {
  const root = join(dir, name);
  mkdirSync(root);
  execSync(`git archive ${rev} bin src package.json | tar -x -C ${root}`, { cwd: ROOT });
  symlinkSync(join(ROOT, 'node_modules'), join(root, 'node_modules'));
  return root;
}
const baseRoot = exportRevision(values.base, 'base');
const headRoot = values.head === undefined ? ROOT : exportRevision(values.head, 'head');
const useWrk = wrkVersion() !== undefined;
const engine = await startEngine(dir, 5, 0);
const json = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'Say hello in one short sentence, please.' }], max_tokens: 16 });
try {
  const variants: Array<{ label: string; peer: Peer }> = [];
  for (const [label, root] of [
    [`base ${values.base}`, baseRoot],
    [values.head === undefined ? 'working tree' : `head ${values.head.slice(0, 10)}`, headRoot],
  ] as const) {
    for (const receipts of [false, true]) variants.push({ label: `${label}${receipts ? ', receipts' : ''}`, peer: await startSigilFrom(root, dir, engine.port, `${label.replace(/\W+/g, '-')}-${receipts}`, receipts) });
  }
  const worker = fork(join(ROOT, 'bench', 'load-client.ts'), [], { execArgv: ['--import', 'tsx'] });
  if (worker.pid !== undefined) pin(worker.pid, LOAD_CORE);
  const stream = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'Say hello in one short sentence, please.' }], max_tokens: 16, stream: true });
  const load = async (peer: Peer, s: number): Promise<{ requests: number; rps: number }> => {
    if (values.mode !== 'stream') return saturate(dir, peer.target, json, 50, s, LOAD_CORE, useWrk);
    const result = await new Promise<LoadResult>((resolve) => {
      worker.once('message', (m: { result: LoadResult }) => resolve(m.result));
      worker.send({ kind: 'load', mode: 'stream', target: peer.target, body: stream, concurrency: 50, durationMs: s * 1000, tokens: 16 });
    });
    return { requests: result.requests, rps: result.rps };
  };
  for (const v of variants) await load(v.peer, 2);
  const cpu = new Map<string, number[]>();
  const rps = new Map<string, number[]>();
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? variants : [...variants].reverse();
    for (const v of order) {
      const before = cpuMicros(v.peer.pids());
      const result = await load(v.peer, seconds);
      const used = cpuMicros(v.peer.pids()) - before;
      cpu.set(v.label, [...(cpu.get(v.label) ?? []), used / result.requests]);
      rps.set(v.label, [...(rps.get(v.label) ?? []), result.rps]);
    }
  }
  process.stdout.write(`A/B, ${values.mode === 'stream' ? 'streams' : 'JSON'} c=50, ${rounds} interleaved rounds of ${seconds} s; median (min–max)\n`);
  for (const v of variants) {
    const c = spread(cpu.get(v.label)!);
    const q = spread(rps.get(v.label)!);
    process.stdout.write(`${v.label.padEnd(28)} CPU µs/${values.mode === 'stream' ? 'stream' : 'request'} ${c.median.toFixed(1)} (${c.min.toFixed(1)}–${c.max.toFixed(1)})   req/s ${q.median.toFixed(0)} (${q.min.toFixed(0)}–${q.max.toFixed(0)})\n`);
  }
  for (const v of variants) await v.peer.stop();
  worker.kill();
} finally {
  await stopChild(engine.spawned.child);
  killAllStarted();
  rmSync(dir, { recursive: true, force: true });
}
