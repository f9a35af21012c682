/**
 * Fleet throughput on this machine: one Sigil (no Redis), one Sigil in fleet mode, and a fleet of three
 * Sigil processes on one Redis, all in front of the same fake engine, measured in the same run with
 * interleaved rounds. Load: JSON chat completions, one API key, per-key rate limit on (so every
 * request counts in Redis), round-robin over the replicas' ports.
 *
 *   node --import tsx bench/fleet.ts [--rounds 3] [--seconds 8] [--connections 48]
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createRequire } from 'node:module';
import { stringify } from 'yaml';
import { addKey } from '../src/auth/keys-file.ts';
import { BENCH_MODEL, ROOT } from './peers.ts';
import { freePort, killAllStarted, spawnLogged, stopChild, waitForPort, type Spawned } from './processes.ts';

const { values: args } = parseArgs({
  options: { rounds: { type: 'string', default: '3' }, seconds: { type: 'string', default: '8' }, connections: { type: 'string', default: '48' } },
});
const ROUNDS = Number(args.rounds);
const SECONDS = Number(args.seconds);
const CONNECTIONS = Number(args.connections);
const WARMUP_S = 2;

interface AutocannonResult {
  requests: { average: number };
  latency: { p50: number; p99: number };
  errors: number;
  non2xx: number;
  statusCodeStats: Record<string, { count: number }>;
}
/** autocannon ships no types; this is the part of its API used here. */
const autocannon = createRequire(import.meta.url)('autocannon') as (options: Record<string, unknown>) => Promise<AutocannonResult>;

type Setup = 'single' | 'fleet-1' | 'fleet-3';
const SETUPS: Setup[] = ['single', 'fleet-1', 'fleet-3'];

const dir = mkdtempSync(join(tmpdir(), 'sigil-fleet-bench-'));
const keysFile = join(dir, 'api-keys');
const { key } = addKey(keysFile, 'bench');
const body = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'hello' }], max_tokens: 16 });

function writeModels(): void {
  writeFileSync(join(dir, 'models.yaml'), stringify({ models: [BENCH_MODEL] }));
}

async function startReplica(name: string, enginePort: number, redisUrl: string | undefined): Promise<{ port: number; spawned: Spawned }> {
  const port = await freePort();
  const config = {
    listen: { host: '127.0.0.1', port },
    upstreams: { fake: { url: `http://127.0.0.1:${enginePort}/v1`, connections: 512 } },
    catalogue: join(dir, 'models.yaml'),
    auth: { keys_file: keysFile },
    // The per-key rate counts in Redis on every request. The per-key concurrency cap is lifted: a client that
    // disconnects while admission awaits Redis leaks its slot (until the slot TTL), and the load generator
    // drops all its connections at the end of each run.
    limits: { requests_per_minute: 1_000_000_000, max_concurrent_per_key: 1_000_000 },
    log: { level: 'warn' },
    ...(redisUrl === undefined ? {} : { fleet: { redis_url: redisUrl, replica_id: name, namespace: 'bench' } }),
  };
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, stringify(config));
  const spawned = spawnLogged(process.execPath, [join(ROOT, 'bin', 'sigil.js'), 'serve', '--config', file], join(dir, `${name}.log`), { cwd: ROOT });
  await waitForPort(port, 30_000, spawned.child);
  return { port, spawned };
}

async function load(ports: number[], seconds: number): Promise<{ rps: number; p50: number; p99: number; errors: number; statuses: string }> {
  const result = await autocannon({
    url: ports.map((p) => `http://127.0.0.1:${p}/v1/chat/completions`),
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body,
    connections: CONNECTIONS,
    duration: seconds,
  });
  const statuses = Object.entries(result.statusCodeStats)
    .map(([status, { count }]) => `${status}:${count}`)
    .join(' ');
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, errors: result.errors + result.non2xx, statuses };
}

async function main(): Promise<void> {
  if (spawnSync('redis-server', ['--version']).status !== 0) throw new Error('redis-server is not installed (apt-get install redis-server)');
  writeModels();
  mkdirSync(dir, { recursive: true });
  const redisPort = await freePort();
  const redis = spawnLogged('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], join(dir, 'redis.log'));
  await waitForPort(redisPort, 10_000, redis.child);
  const enginePort = await freePort();
  const engine = spawnLogged(
    process.execPath,
    ['--import', 'tsx', join(ROOT, 'bench', 'fake-engine.ts'), '--port', String(enginePort), '--json-ms', '0'],
    join(dir, 'engine.log'),
    { cwd: ROOT },
  );
  await waitForPort(enginePort, 20_000, engine.child);
  const redisUrl = `redis://127.0.0.1:${redisPort}`;

  const samples: Record<Setup, number[]> = { single: [], 'fleet-1': [], 'fleet-3': [] };
  const detail: string[] = [];
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      for (const setup of SETUPS) {
        const count = setup === 'fleet-3' ? 3 : 1;
        const replicas = [];
        for (let i = 0; i < count; i++) replicas.push(await startReplica(`${setup}-${i}`, enginePort, setup === 'single' ? undefined : redisUrl));
        const ports = replicas.map((r) => r.port);
        await load(ports, WARMUP_S);
        const r = await load(ports, SECONDS);
        samples[setup].push(r.rps);
        detail.push(
          `round ${round} ${setup.padEnd(8)} ${r.rps.toFixed(0).padStart(6)} req/s  p50 ${r.p50} ms  p99 ${r.p99} ms  errors ${r.errors} (${r.statuses})`,
        );
        process.stderr.write(detail.at(-1) + '\n');
        await Promise.all(replicas.map((rep) => stopChild(rep.spawned.child, 'SIGTERM')));
      }
    }
  } finally {
    await stopChild(engine.child);
    await stopChild(redis.child);
  }

  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const m = Object.fromEntries(SETUPS.map((s) => [s, median(samples[s])])) as Record<Setup, number>;
  process.stdout.write(
    [
      `# Fleet throughput (${cpus().length} cores, ${CONNECTIONS} connections, ${SECONDS} s per sample, ${ROUNDS} interleaved rounds, JSON, no receipts)`,
      '',
      ...detail,
      '',
      `median req/s: single ${m.single.toFixed(0)}, fleet of 1 ${m['fleet-1'].toFixed(0)}, fleet of 3 ${m['fleet-3'].toFixed(0)}`,
      `fleet of 3 / single: ${(m['fleet-3'] / m.single).toFixed(2)}   fleet of 3 / fleet of 1: ${(m['fleet-3'] / m['fleet-1']).toFixed(2)}   fleet of 1 / single: ${(m['fleet-1'] / m.single).toFixed(2)}`,
      '',
    ].join('\n'),
  );
  rmSync(dir, { recursive: true, force: true });
}

main().catch((err: unknown) => {
  killAllStarted();
  process.stderr.write(`bench/fleet: ${(err as Error).message}\n`);
  process.exitCode = 1;
});
