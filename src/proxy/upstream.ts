import { Pool, type Dispatcher } from 'undici';
import type { UpstreamConfig } from '../config/schema.ts';
import { pinningConnector, SpkiPin } from '../verify/tls-pin.ts';
import { engineUnreachableCause } from './engine-unreachable.ts';
import { SigilError } from '../protocol/sigil-error.ts';

/** What the proxy reports about its engines; the metrics implement it (the proxy knows nothing of Prometheus). */
export interface UpstreamObserver {
  /** One engine request: seconds to the engine's response headers (or to the failure), and its HTTP status or error code. */
  requestDone(upstream: string, seconds: number, outcome: string): void;
  /** A request moved on from an engine that could not be reached to the next one. */
  failedOver(from: string, to: string): void;
  /** An engine was marked unreachable, or reachable again. */
  healthChanged(upstream: string, up: boolean): void;
}

/** Marks an engine reachable or not (with why not, in words), telling the observer and the listeners when that changes. */
export function setUpstreamHealth(upstream: Upstream, up: boolean, cause?: string): void {
  const { health } = upstream;
  const answeredAgain = up && health.cause !== undefined;
  if (up) delete health.cause;
  else if (cause !== undefined) health.cause = cause;
  if (health.up !== up) {
    health.up = up;
    upstream.observer?.healthChanged(upstream.name, up);
  } else if (!answeredAgain) return;
  for (const listener of health.listeners ?? []) listener(up);
}

/**
 * The start could not reach the engine: its cause is kept (and said) and the health checks ask it until it answers,
 * while requests still try it first, as any engine not yet seen failing a request (failover marks it down).
 */
export function markUnreachableAtStart(upstream: Upstream, cause: string): void {
  upstream.health.cause = cause;
}

export const DEFAULT_HEALTH_CHECK_INTERVAL_MS = 5000;

/**
 * Every `intervalMs`, asks each engine marked down for its model list; any HTTP answer means it is
 * reachable again. Engines that are up get no extra traffic: a failed request is what marks one down.
 */
export function startHealthChecks(upstreams: readonly Upstream[], intervalMs: number): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    void Promise.all(upstreams.filter((u) => !u.health.up || u.health.cause !== undefined).map(probe)).finally(() => (running = false));
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

async function probe(upstream: Upstream): Promise<void> {
  try {
    const response = await requestModelList(upstream);
    await response.body.dump();
    setUpstreamHealth(upstream, true);
  } catch (err) {
    // Still unreachable: stays as it is until a later check answers; only the cause may have changed.
    upstream.health.cause = engineUnreachableCause(err);
  }
}

/** GET `<engine>/models`, as every check of an engine asks it: health, the start's listing check, `config check --probe`. */
export function requestModelList(upstream: Upstream, timeoutMs = 5000): Promise<Dispatcher.ResponseData> {
  return upstream.pool.request({
    method: 'GET',
    path: `${upstream.basePath}/models`,
    headers: upstream.headers,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
}

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
  /** The configured base URL, for messages to the operator (it holds no credentials: those are in `api_key_env`). */
  url: string;
  /**
   * Down after a request could not reach it, up again when a health check gets an answer; `cause` says in words why it was
   * last not reached (a request, a health check or the start's model list), until it answers.
   */
  health: { up: boolean; cause?: string; listeners?: Array<(up: boolean) => void> };
  /** Told of every engine request; set by whoever keeps the metrics. */
  observer: UpstreamObserver | undefined;
}

export class UpstreamConfigError extends SigilError<'ERR_UPSTREAM_CONFIG'> {
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_UPSTREAM_CONFIG', message, options);
  }
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
    url: `${url.origin}${url.pathname}`,
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
    health: { up: true },
    observer: undefined,
  };
}

export type UpstreamSet = ReadonlyMap<string, Upstream>;

const stopHealthChecks = new WeakMap<UpstreamSet, () => void>();

/** The configured engines, with the health checks that bring an unreachable one back (stopped by closeUpstreams). */
export function createUpstreams(configs: Record<string, UpstreamConfig>): Map<string, Upstream> {
  const upstreams = new Map(Object.entries(configs).map(([name, c]) => [name, createUpstream(name, c)]));
  const intervals = Object.values(configs).map((c) => c.health_check_interval_ms ?? DEFAULT_HEALTH_CHECK_INTERVAL_MS);
  if (upstreams.size > 0) stopHealthChecks.set(upstreams, startHealthChecks([...upstreams.values()], Math.min(...intervals)));
  return upstreams;
}

export async function closeUpstreams(upstreams: UpstreamSet): Promise<void> {
  stopHealthChecks.get(upstreams)?.();
  await Promise.all([...upstreams.values()].map((u) => u.pool.close()));
}
