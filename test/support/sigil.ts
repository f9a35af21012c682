import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { stringify } from 'yaml';
import { addKey } from '../../src/auth/keys-file.ts';
import type { Endpoint } from '../../src/catalogue/schema.ts';
import { parseConfig } from '../../src/config/load.ts';
import { startSigil, type RunningSigil, type StartOptions } from '../../src/http/start.ts';
import { createLogger } from '../../src/logger/logger.ts';

export interface CatalogueModelSpec {
  id: string;
  upstream_model?: string;
  upstream?: string | string[];
  regions?: string[];
  provider?: string;
  reasoning?: boolean;
  context_window?: number;
  endpoints?: Endpoint[];
  model_hash?: string;
  weights?: string;
}

export interface TestSigil extends RunningSigil {
  dir: string;
  /** A valid API key and a second one, for cross-key checks. */
  key: string;
  otherKey: string;
  /** Every log line Sigil wrote, raw. */
  logs: string[];
}

const HASH = (n: number) => 'sha256:' + n.toString(16).padStart(2, '0').repeat(32);

export function catalogueEntry(spec: CatalogueModelSpec, i: number): Record<string, unknown> {
  return {
    id: spec.id,
    name: `Model ${spec.id}`,
    provider: spec.provider ?? 'test-provider',
    created: 1_700_000_000 + i,
    context_window: spec.context_window ?? 131072,
    reasoning: spec.reasoning ?? true,
    regions: spec.regions ?? ['eu-west'],
    pricing: { input_per_mtok: 0.5, output_per_mtok: 1.5, currency: 'USD' },
    model_hash: spec.model_hash ?? HASH(i + 1),
    ...(spec.weights ? { weights: spec.weights } : {}),
    ...(spec.upstream_model ? { upstream_model: spec.upstream_model } : {}),
    ...(spec.upstream ? { upstream: spec.upstream } : {}),
    ...(spec.endpoints ? { endpoints: spec.endpoints } : {}),
  };
}

/** Starts Sigil in-process on an ephemeral loopback port with a fresh config, catalogue and keys file. */
export async function startTestSigil(options: {
  upstreams: Record<string, Record<string, unknown>>;
  models: CatalogueModelSpec[];
  config?: Record<string, unknown>;
  start?: Omit<StartOptions, 'logger'>;
}): Promise<TestSigil> {
  const dir = mkdtempSync(join(tmpdir(), 'sigil-test-'));
  writeFileSync(join(dir, 'models.yaml'), stringify({ models: options.models.map(catalogueEntry) }));
  const config = {
    listen: { host: '127.0.0.1', port: 0 },
    // The prefix-cache salt (on by default) is off here unless a test turns it on: the relay tests compare the engine's bytes with the client's.
    upstreams: Object.fromEntries(Object.entries(options.upstreams).map(([name, u]) => [name, { cache_salt: false, ...u }])),
    catalogue: 'models.yaml',
    auth: { keys_file: 'api-keys' },
    log: { level: 'info' },
    // Hermetic: never the dist/trust-page an earlier `npm run build` left in the working tree.
    trust_page: { dir: join(dir, 'trust-page-not-built') },
    ...options.config,
  };
  writeFileSync(join(dir, 'sigil.yaml'), stringify(config));
  const { key } = addKey(join(dir, 'api-keys'), 'test');
  const { key: otherKey } = addKey(join(dir, 'api-keys'), 'other');
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logs.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  const loaded = parseConfig(stringify(config), join(dir, 'sigil.yaml'));
  // The config's level, so a test that asks for trace sees trace lines.
  // The test runner's own node options (vitest preloads a file) are not Sigil's: a clean runtime unless a test gives one.
  const sigil = await startSigil(loaded, { runtime: { execArgv: [], env: {} }, ...options.start, logger: createLogger(loaded.log.level, sink) });
  return { ...sigil, dir, key, otherKey, logs };
}

/**
 * The request log lines written since `from` once `count` of them are there: the line is written when
 * the response's socket closes, a moment after the client has the body, so a test waits for it
 * (polling the in-memory sink) instead of sleeping a fixed time and hoping.
 */
export async function requestLines(sigil: Pick<TestSigil, 'logs'>, from: number, count = 1, timeoutMs = 5000): Promise<Array<Record<string, unknown>>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const lines = sigil.logs
      .slice(from)
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'request');
    if (lines.length >= count || Date.now() > deadline) return lines;
    await new Promise((r) => setImmediate(r));
  }
}
