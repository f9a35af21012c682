import { engineErrorToHttp, postToEngines, readEngineBody } from '../../proxy/engine-request.ts';
import { cacheSaltOf, withCacheSalt } from '../../proxy/cache-salt.ts';
import type { Upstream } from '../../proxy/upstream.ts';
import type { ForwardedExchange, ValidExchange } from './exchange.ts';

/** The most of an engine's refusal read, to say what the engine said. */
const ENGINE_ERROR_LIMIT = 1024 * 1024;
/** The endpoints whose engine requests take vLLM's `cache_salt`. */
const SALTED_ENDPOINTS = new Set(['chat', 'completions']);

/**
 * Forward: the request to the first engine of the candidates that can be reached (failing over on a
 * refused connection), salted per API key for an engine that isolates its prefix cache by salt
 * (docs/configuration.md#prefix-cache-isolation). An engine's refusal becomes an `upstream_*` error, its model name put back
 * to the catalogue's.
 */
export async function forward(x: ValidExchange): Promise<ForwardedExchange> {
  const unsalted = x.forwarded;
  let salted: Buffer | undefined;
  const bodyFor = (u: Upstream) =>
    u.cacheSalt && SALTED_ENDPOINTS.has(x.endpoint.kind)
      ? (salted ??= withCacheSalt(unsalted, cacheSaltOf(x.caller), unsalted === x.raw ? x.chat.scan : undefined))
      : unsalted;
  const {
    response: engine,
    upstream,
    body,
  } = await postToEngines(x.candidates, x.endpoint.enginePath, bodyFor, x.req.headers, x.abort, x.endpoint.engineHeaders);
  x.forwarded = body;
  x.log.upstream = upstream.name;
  if (engine.statusCode >= 300) {
    const bytes = await readEngineBody(engine, ENGINE_ERROR_LIMIT).catch(() => Buffer.alloc(0));
    const retryAfter = engine.headers['retry-after'];
    const { model } = x.chat;
    const rename = x.rewriteModel === undefined ? undefined : { engine: model.upstream_model, catalogue: model.id };
    throw engineErrorToHttp(engine.statusCode, bytes, typeof retryAfter === 'string' ? retryAfter : undefined, rename);
  }
  return Object.assign(x, { engine });
}
