import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AppContext } from '../context.ts';
import { httpError } from '../../protocol/errors.ts';

const digest = (value: string) => createHash('sha256').update(value).digest();

/** Who may read /metrics: anyone with the token, or (no token configured, or its variable empty) loopback peers only. */
export type MetricsAccess = 'off' | 'bearer token' | 'loopback only';

export function metricsAccess(metrics: { enabled: boolean; bearer_token_env?: string | undefined }, env: NodeJS.ProcessEnv): MetricsAccess {
  if (!metrics.enabled) return 'off';
  return metricsToken(metrics, env) === undefined ? 'loopback only' : 'bearer token';
}

export function metricsToken(metrics: { bearer_token_env?: string | undefined }, env: NodeJS.ProcessEnv): string | undefined {
  const token = metrics.bearer_token_env === undefined ? undefined : env[metrics.bearer_token_env];
  return token === undefined || token === '' ? undefined : token;
}

const FORWARDING_HEADERS = ['x-forwarded-for', 'forwarded', 'x-real-ip'];

/** A peer on this host that forwards for nobody: a proxy on the same host reaches Sigil from loopback too, but says for whom. */
function isLocalCaller(req: IncomingMessage): boolean {
  const peer = req.socket.remoteAddress ?? '';
  const loopback = peer === '::1' || /^(::ffff:)?127\./.test(peer);
  return loopback && FORWARDING_HEADERS.every((name) => req.headers[name] === undefined);
}

/**
 * GET /metrics: Prometheus text (per-key token counts among it). With `metrics.bearer_token_env` set (and its variable
 * not empty), behind that bearer token; without it, only for a loopback peer that forwards for nobody.
 */
export function createMetricsHandler(token: string | undefined) {
  const expected = token === undefined ? undefined : digest(`Bearer ${token}`);
  return async function handleMetrics(req: IncomingMessage, res: ServerResponse, ctx: AppContext): Promise<void> {
    if (expected !== undefined && !timingSafeEqual(digest(req.headers.authorization ?? ''), expected)) {
      throw httpError('invalid_api_key', 'The metrics endpoint needs its bearer token.');
    }
    if (expected === undefined && !isLocalCaller(req)) {
      throw httpError('metrics_loopback_only', 'The metrics endpoint answers only on this host; set metrics.bearer_token_env to scrape it from elsewhere.');
    }
    const body = await ctx.metrics.scrape();
    res.writeHead(200, { 'content-type': ctx.metrics.registry.contentType, 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
}
