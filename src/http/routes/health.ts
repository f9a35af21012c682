import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AppContext } from '../context.ts';
import { httpError } from '../../protocol/errors.ts';
import { sendJson } from '../respond.ts';
import { requestModelList, type Upstream } from '../../proxy/upstream.ts';
import { engineUnreachableCause } from '../../proxy/engine-unreachable.ts';
import { waitingFor } from '../engine-readiness.ts';

const PROBE_TIMEOUT_MS = 2000;
const PROBE_CACHE_MS = 1000;

/** GET /healthz: the process is up. */
export function handleHealthz(_req: IncomingMessage, res: ServerResponse): void {
  sendJson(res, 200, '{"status":"ok"}');
}

/** Undefined when the engine answers its model list; else why not, in words. */
async function probe(upstream: Upstream): Promise<string | undefined> {
  try {
    const response = await requestModelList(upstream, PROBE_TIMEOUT_MS);
    await response.body.dump();
    return response.statusCode < 500 ? undefined : `it answered HTTP ${response.statusCode}`;
  } catch (err) {
    return engineUnreachableCause(err);
  }
}

/**
 * GET /readyz: ready when the signing key is published in the JWKS and every catalogue model has at least one
 * reachable engine. Probes are shared by concurrent callers and cached for a second.
 */
export function createReadyHandler(lifecycle: { draining: boolean }) {
  let last: { at: number; health: string; result: Promise<Record<string, string | undefined>> } | undefined;

  return async function handleReadyz(_req: IncomingMessage, res: ServerResponse, ctx: AppContext): Promise<void> {
    if (lifecycle.draining) throw httpError('not_ready', 'Not ready: shutting down.');
    const now = Date.now();
    // An engine found up or down since (by a request or a health check) is asked again at once, so /readyz agrees with "ready".
    const health = [...ctx.upstreams.values()].map((u) => `${u.health.up}:${u.health.cause ?? ''}`).join();
    if (last === undefined || now - last.at > PROBE_CACHE_MS || last.health !== health) {
      const entries = [...ctx.upstreams.values()].map(async (u) => [u.name, await probe(u)] as const);
      last = { at: now, health, result: Promise.all(entries).then(Object.fromEntries) };
    }
    const problems = await last.result;
    const engines = Object.fromEntries(Object.keys(problems).map((name) => [name, problems[name] === undefined]));
    const modelsServed = ctx.catalogue.models.every((m) => m.upstreams.some((name) => engines[name] === true));
    // The key signs receipts only a verifier can check once the served JWKS carries it (in fleet mode, once Redis has it).
    const keysLoaded = ctx.jwks.keys.some((k) => k.kid === ctx.signingKey.kid);
    if (!modelsServed || !keysLoaded) {
      const down = [...ctx.upstreams.values()].filter((u) => problems[u.name] !== undefined).map((u) => waitingFor(u.name, u.url, problems[u.name]!));
      throw httpError('not_ready', keysLoaded ? `Not ready: ${down.join('; ')}.` : 'Not ready: the signing key is not in the published JWKS yet.');
    }
    // Fleet mode: Redis down is `fleet: "degraded"` but still ready, since chat runs on local state meanwhile.
    const fleet = ctx.fleet === undefined ? {} : { fleet: ctx.fleet.health() };
    sendJson(res, 200, JSON.stringify({ status: 'ready', keys_loaded: keysLoaded, engines, ...fleet }));
  };
}
