import { Pool } from 'undici';
import type { UpstreamConfig } from '../config/schema.ts';
import { pinningConnector, SpkiPin } from '../verify/tls-pin.ts';

/** One engine Sigil forwards to, with its own connection pool. */
export interface Upstream {
  name: string;
  region: string | undefined;
  /** The engine's OpenAI base path, e.g. `/v1`. */
  basePath: string;
  pool: Pool;
  /** Headers sent with every request to this engine (its own credentials, never the client's). */
  headers: Record<string, string>;
  /** Client headers (lower case) passed on when present; configured, none by default. */
  forwardHeaders: readonly string[];
  timeoutMs: number;
  idleTimeoutMs: number;
  /** Whether chat and completions requests carry the caller's `cache_salt`. */
  cacheSalt: boolean;
}

export class UpstreamConfigError extends Error {
  readonly code = 'ERR_UPSTREAM_CONFIG';
}

export function createUpstream(name: string, config: UpstreamConfig, env: NodeJS.ProcessEnv = process.env): Upstream {
  const url = new URL(config.url);
  const headers: Record<string, string> = {};
  if (config.api_key_env !== undefined) {
    const secret = env[config.api_key_env];
    if (secret === undefined || secret === '') {
      throw new UpstreamConfigError(`upstreams.${name}.api_key_env: environment variable ${config.api_key_env} is not set`);
    }
    headers.authorization = `Bearer ${secret}`;
  }
  const path = url.pathname.replace(/\/+$/, '');
  return {
    name,
    region: config.region,
    basePath: path === '' ? '/v1' : path,
    pool: new Pool(url.origin, {
      connections: config.connections,
      // A pinned engine must present the configured key on every connection, before any request byte.
      connect: config.tls_pin_sha256 === undefined ? { timeout: config.connect_timeout_ms } : pinningConnector(new SpkiPin([config.tls_pin_sha256])),
      keepAliveTimeout: 30_000,
    }),
    headers,
    forwardHeaders: config.forward_headers,
    timeoutMs: config.timeout_ms,
    idleTimeoutMs: config.idle_timeout_ms,
    cacheSalt: config.cache_salt,
  };
}

export type UpstreamSet = ReadonlyMap<string, Upstream>;

export function createUpstreams(configs: Record<string, UpstreamConfig>): Map<string, Upstream> {
  return new Map(Object.entries(configs).map(([name, c]) => [name, createUpstream(name, c)]));
}

export async function closeUpstreams(upstreams: UpstreamSet): Promise<void> {
  await Promise.all([...upstreams.values()].map((u) => u.pool.close()));
}
