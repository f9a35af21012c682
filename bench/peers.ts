/**
 * The peers compared side by side, all in front of the same fake engine: the engine directly, a
 * minimal node:http proxy, nginx, the Portkey gateway, and Sigil (without receipts, and with a
 * receipt on every request, as two processes so the receipt store of one cannot weigh on the other).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { addKey } from '../src/auth/keys-file.ts';
import type { Target } from './load-client.ts';
import { childPids, freePort, hasTaskset, pin, spawnLogged, stopChild, waitForPort, type Spawned } from './processes.ts';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BENCH = join(ROOT, 'bench');
const TSX = ['--import', 'tsx'];
const CHAT_PATH = '/v1/chat/completions';
export const PROXY_CORE = 0;
export const LOAD_CORE = 1;

export type PeerName = 'direct' | 'node-http' | 'nginx' | 'go' | 'go-ecdsa' | 'portkey' | 'sigil' | 'sigil-receipts';

export const PEER_LABELS: Record<PeerName, string> = {
  direct: 'engine directly',
  'node-http': 'minimal node:http proxy',
  nginx: 'nginx',
  go: 'Go httputil.ReverseProxy (stdlib)',
  'go-ecdsa': 'Go + ECDSA P-256 per response',
  portkey: 'Portkey gateway',
  sigil: 'Sigil, no receipts',
  'sigil-receipts': 'Sigil, receipt on every request',
};

/** A proxy (or the engine) under measurement, named by its benchmark's own peer names. */
export interface NamedPeer<N extends string> {
  name: N;
  target: Target;
  /** The processes that are the proxy (empty for the engine itself): for CPU time and RSS. */
  pids(): number[];
  stop(): Promise<void>;
}

export type Peer = NamedPeer<PeerName>;

export interface Unavailable {
  name: PeerName;
  note: string;
}

export interface Engine {
  port: number;
  spawned: Spawned;
}

const jsonHeaders = { 'content-type': 'application/json' };

export async function startEngine(dir: string, chunkMs: number, jsonMs: number): Promise<Engine> {
  const port = await freePort();
  const spawned = spawnLogged(
    process.execPath,
    [...TSX, join(BENCH, 'fake-engine.ts'), '--port', String(port), '--chunk-ms', String(chunkMs), '--json-ms', String(jsonMs)],
    join(dir, 'engine.log'),
  );
  await waitForPort(port, 20_000, spawned.child);
  pin(spawned.pid, LOAD_CORE);
  return { port, spawned };
}

export function directPeer(engine: Engine): Peer {
  return { name: 'direct', target: { host: '127.0.0.1', port: engine.port, path: CHAT_PATH, headers: jsonHeaders }, pids: () => [], stop: async () => {} };
}

/** A spawned proxy once its port answers, pinned to the proxy core; stopped with `signal` (nginx wants SIGQUIT). */
export async function pinnedProcess<N extends string>(
  name: N,
  spawned: Spawned,
  port: number,
  target: Target,
  extraPids: () => number[] = () => [],
  signal: NodeJS.Signals = 'SIGINT',
): Promise<NamedPeer<N>> {
  try {
    await waitForPort(port, 30_000, spawned.child);
  } catch (err) {
    await stopChild(spawned.child);
    throw new Error(`${(err as Error).message}; see ${spawned.log}`, { cause: err });
  }
  const pids = () => [spawned.pid, ...extraPids()];
  for (const pid of pids()) pin(pid, PROXY_CORE);
  return { name, target, pids, stop: () => stopChild(spawned.child, signal) };
}

export async function startNodeHttpProxy(dir: string, engine: Engine): Promise<NamedPeer<'node-http'>> {
  const port = await freePort();
  const spawned = spawnLogged(
    process.execPath,
    [...TSX, join(BENCH, 'minimal-proxy.ts'), '--port', String(port), '--upstream', `http://127.0.0.1:${engine.port}`],
    join(dir, 'node-http.log'),
  );
  return pinnedProcess('node-http', spawned, port, { host: '127.0.0.1', port, path: CHAT_PATH, headers: jsonHeaders });
}

export function nginxVersion(): string | undefined {
  const r = spawnSync('nginx', ['-v'], { encoding: 'utf8' });
  if (r.error !== undefined || r.status !== 0) return undefined;
  return /nginx\/(\S+)/.exec(r.stderr)?.[1] ?? 'unknown';
}

export async function startNginx(dir: string, engine: Engine): Promise<Peer> {
  const port = await freePort();
  const home = join(dir, 'nginx');
  mkdirSync(home, { recursive: true });
  const conf = readFileSync(join(BENCH, 'nginx.conf.template'), 'utf8')
    .replaceAll('{{user}}', process.getuid?.() === 0 ? 'user root;' : '')
    .replaceAll('{{dir}}', home)
    .replaceAll('{{port}}', String(port))
    .replaceAll('{{enginePort}}', String(engine.port));
  writeFileSync(join(home, 'nginx.conf'), conf);
  const spawned = spawnLogged('nginx', ['-p', home, '-c', join(home, 'nginx.conf'), '-e', join(home, 'error.log')], join(dir, 'nginx.log'));
  const peer = await pinnedProcess('nginx', spawned, port, { host: '127.0.0.1', port, path: CHAT_PATH, headers: jsonHeaders }, () => childPids(spawned.pid));
  return { ...peer, stop: () => stopChild(spawned.child, 'SIGQUIT') };
}

export function goVersion(): string | undefined {
  const r = spawnSync('go', ['version'], { encoding: 'utf8' });
  if (r.error !== undefined || r.status !== 0) return undefined;
  return /go version go(\S+)/.exec(r.stdout)?.[1] ?? 'unknown';
}

/** bench/go-proxy built once per run into `dir` (standard library only: no module download). */
export function buildGoProxy(dir: string): string {
  const binary = join(dir, 'go-proxy');
  if (existsSync(binary)) return binary;
  const r = spawnSync('go', ['build', '-o', binary, '.'], {
    cwd: join(BENCH, 'go-proxy'),
    encoding: 'utf8',
    env: { ...process.env, GOFLAGS: '-mod=mod', GOPROXY: 'off', GOCACHE: join(dir, 'go-cache'), GOPATH: join(dir, 'go-path') },
  });
  if (r.status !== 0) throw new Error(`go build bench/go-proxy failed: ${r.stderr || r.error?.message}`);
  return binary;
}

/** Go's standard-library reverse proxy; with `sign`, an ECDSA P-256 signature over every response's SHA-256. */
export async function startGoProxy(dir: string, engine: Engine, sign: boolean): Promise<Peer> {
  const name = sign ? 'go-ecdsa' : 'go';
  const port = await freePort();
  const args = ['-port', String(port), '-upstream', `http://127.0.0.1:${engine.port}`, ...(sign ? ['-sign'] : [])];
  // GOMAXPROCS=1: the proxy gets one core, as every other peer is pinned to one.
  const spawned = spawnLogged(buildGoProxy(dir), args, join(dir, `${name}.log`), { env: { ...process.env, GOMAXPROCS: '1' } });
  return pinnedProcess(name, spawned, port, { host: '127.0.0.1', port, path: CHAT_PATH, headers: jsonHeaders });
}

export function portkeyEntry(): { file: string; version: string } | undefined {
  try {
    const require = createRequire(join(ROOT, 'package.json'));
    const pkgFile = require.resolve('@portkey-ai/gateway/package.json');
    const version = (JSON.parse(readFileSync(pkgFile, 'utf8')) as { version: string }).version;
    const file = join(dirname(pkgFile), 'build', 'start-server.js');
    return existsSync(file) ? { file, version } : undefined;
  } catch {
    return undefined;
  }
}

/** Portkey's Node build (Hono on @hono/node-server); it routes to the engine via its OpenAI provider with a custom host. */
export async function startPortkey(dir: string, engine: Engine): Promise<Peer> {
  const entry = portkeyEntry();
  if (entry === undefined) throw new Error('@portkey-ai/gateway is not installed (npm ci installs it as a devDependency)');
  const port = await freePort();
  const spawned = spawnLogged(process.execPath, [entry.file, `--port=${port}`, '--headless'], join(dir, 'portkey.log'), {
    env: { ...process.env, NODE_ENV: 'production' },
  });
  return pinnedProcess('portkey', spawned, port, {
    host: '127.0.0.1',
    port,
    path: CHAT_PATH,
    headers: { ...jsonHeaders, authorization: 'Bearer bench', 'x-portkey-provider': 'openai', 'x-portkey-custom-host': `http://127.0.0.1:${engine.port}/v1` },
  });
}

export interface SigilOptions {
  receipts: boolean;
  /** Extra node flags, e.g. --cpu-prof. */
  nodeArgs?: string[];
  logLevel?: string;
}

/** The one catalogue entry every benchmark serves. */
export const BENCH_MODEL = {
  id: 'bench-model',
  name: 'Bench',
  provider: 'bench',
  created: 0,
  context_window: 131072,
  reasoning: false,
  regions: ['local'],
  pricing: { input_per_mtok: 0, output_per_mtok: 0, currency: 'USD' },
  model_hash: 'sha256:' + 'ab'.repeat(32),
};

export function writeSigilConfig(
  dir: string,
  enginePort: number,
  port: number,
  logLevel = 'warn',
  extra: Record<string, unknown> = {},
): { config: string; key: string } {
  const { limits, ...rest } = extra as { limits?: Record<string, unknown> };
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'models.yaml'), stringify({ models: [BENCH_MODEL] }));
  const config = {
    listen: { host: '127.0.0.1', port },
    // Enough engine connections for the 1,000-stream memory test (the default pool is 256).
    upstreams: { fake: { url: `http://127.0.0.1:${enginePort}/v1`, connections: 2048 } },
    catalogue: 'models.yaml',
    auth: { keys_file: 'api-keys' },
    // One bench key opens the 1,000 streams of the memory test (defaults: 1,024 in all, 64 per key).
    limits: { max_concurrent: 4096, max_concurrent_per_key: 4096, ...limits },
    log: { level: logLevel },
    // One process, pinned by the caller to the proxy core (`sigil serve` would otherwise fork one worker per core).
    workers: 1,
    ...rest,
  };
  writeFileSync(join(dir, 'sigil.yaml'), stringify(config));
  const { key } = addKey(join(dir, 'api-keys'), 'bench');
  return { config: join(dir, 'sigil.yaml'), key };
}

export async function startSigil(dir: string, engine: Engine, options: SigilOptions): Promise<Peer> {
  const name: PeerName = options.receipts ? 'sigil-receipts' : 'sigil';
  const port = await freePort();
  // No drain on stop: the load has ended by then, and a 5 s drain would outlast stopChild's grace, whose SIGKILL loses --cpu-prof's file.
  const { config, key } = writeSigilConfig(join(dir, name), engine.port, port, options.logLevel, { limits: { shutdown_drain_ms: 0 } });
  // Started under taskset, as bench/ab.ts starts it: a Sigil that sizes itself to the cores it may use (workers, where
  // receipts are signed: src/config/workers.ts) sees the one core it gets, not the machine's.
  const command = [process.execPath, ...(options.nodeArgs ?? []), join(ROOT, 'bin', 'sigil.js'), 'serve', '--config', config];
  const [bin, ...args] = hasTaskset ? ['taskset', '-c', String(PROXY_CORE), ...command] : command;
  const spawned = spawnLogged(bin!, args, join(dir, `${name}.log`), { cwd: ROOT });
  const headers: Record<string, string> = { ...jsonHeaders, authorization: `Bearer ${key}` };
  if (options.receipts) headers['x-service-receipt'] = 'true';
  return pinnedProcess(name, spawned, port, { host: '127.0.0.1', port, path: CHAT_PATH, headers });
}
