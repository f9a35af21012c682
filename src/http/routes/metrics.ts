import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AppContext } from '../context.ts';
import { httpError } from '../../protocol/errors.ts';

const digest = (value: string) => createHash('sha256').update(value).digest();

/** GET /metrics: Prometheus text; behind a bearer token when `metrics.bearer_token_env` is set. */
export function createMetricsHandler(token: string | undefined) {
  const expected = token === undefined ? undefined : digest(`Bearer ${token}`);
  return async function handleMetrics(req: IncomingMessage, res: ServerResponse, ctx: AppContext): Promise<void> {
    if (expected !== undefined && !timingSafeEqual(digest(req.headers.authorization ?? ''), expected)) {
      throw httpError('invalid_api_key', 'The metrics endpoint needs its bearer token.');
    }
    const body = await ctx.metrics.scrape();
    res.writeHead(200, { 'content-type': ctx.metrics.registry.contentType, 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
}
