import { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import { engineRefusal, HttpError } from '../protocol/errors.ts';
import { setUpstreamHealth, type Upstream } from './upstream.ts';
import { engineUnreachableCause, EngineRequestFailure } from './engine-unreachable.ts';
import { validTraceparent, validTracestate } from '../tracing/traceparent.ts';

export type EngineResponse = Dispatcher.ResponseData;

/**
 * Cancels one engine request. undici takes an EventEmitter as its signal; this costs a fraction of an
 * AbortController, whose EventTarget showed in the per-request CPU profile.
 */
export class EngineAbort extends EventEmitter {
  aborted = false;

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.emit('abort');
  }
}

const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
]);

/** Maps a transport failure to what the client sees: 504 when the engine was too slow, 502 otherwise. */
export function engineFailure(err: unknown): HttpError {
  const code = errorCode(err);
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return new HttpError('upstream_timeout', 'The engine did not accept the connection in time.');
  if (code === 'UND_ERR_HEADERS_TIMEOUT') return new HttpError('upstream_timeout', 'The engine did not answer in time.');
  if (code === 'UND_ERR_BODY_TIMEOUT') return new HttpError('upstream_timeout', 'The engine stopped sending before the response was complete.');
  if (UNREACHABLE.has(code)) return new HttpError('upstream_unreachable', 'The engine could not be reached.');
  return new HttpError('upstream_bad_response', 'The engine sent a reply that could not be read.');
}

/**
 * The engine's headers: its own credentials, the JSON framing, the request's id and trace context, the client headers its
 * endpoint always passes (`passed`: the Messages API's version and beta flags) and only the client headers configured to pass.
 */
function engineHeaders(upstream: Upstream, body: Buffer, client: IncomingHttpHeaders, passed: readonly string[]): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of passed) {
    const value = client[name];
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  if (upstream.forwardHeaders.length > 0) {
    // RFC 9110 7.6.1: headers the client names in Connection are for this hop only.
    const hopOnly = new Set(
      (client.connection ?? '')
        .toLowerCase()
        .split(',')
        .map((t) => t.trim()),
    );
    for (const name of upstream.forwardHeaders) {
      const value = client[name];
      if (value !== undefined && !hopOnly.has(name)) headers[name] = Array.isArray(value) ? value.join(', ') : value;
    }
  }
  // Correlation: the request's id (Sigil's, or the client's when well formed) and a well-formed W3C trace context.
  const requestId = client['x-request-id'];
  if (typeof requestId === 'string') headers['x-request-id'] = requestId;
  const traceparent = validTraceparent(client.traceparent);
  if (traceparent !== undefined) {
    headers.traceparent = traceparent;
    const tracestate = validTracestate(client.tracestate);
    if (tracestate !== undefined) headers.tracestate = tracestate;
  }
  Object.assign(headers, upstream.headers);
  headers['content-type'] = 'application/json';
  headers['content-length'] = String(body.length);
  return headers;
}

/** Failures where the engine never got the request, so the next engine can be tried without running it twice. */
const NOT_CONNECTED = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT']);

const errorCode = (err: unknown) => (err as { code?: string }).code ?? (err as { cause?: { code?: string } }).cause?.code ?? '';

/**
 * POSTs a body to the first engine of `candidates` that can be reached, at `enginePath` (e.g.
 * `/chat/completions`); resolves when its status and headers have arrived. An engine that cannot be
 * connected to is marked down (health checks bring it back) and the next one is tried; any other
 * failure is the answer, since that engine may have started on the request.
 */
export async function postToEngines(
  candidates: readonly Upstream[],
  enginePath: string,
  bodyFor: Buffer | ((upstream: Upstream) => Buffer),
  client: IncomingHttpHeaders,
  signal: AbortSignal | EngineAbort,
  passed: readonly string[] = [],
): Promise<{ response: EngineResponse; upstream: Upstream; body: Buffer }> {
  for (let i = 0; ; i++) {
    const upstream = candidates[i]!;
    // The bytes may differ by engine (a per-engine setting such as cache_salt); the caller learns which were sent.
    const body = typeof bodyFor === 'function' ? bodyFor(upstream) : bodyFor;
    const started = performance.now();
    try {
      const response = await upstream.pool.request({
        method: 'POST',
        path: `${upstream.basePath}${enginePath}`,
        headers: engineHeaders(upstream, body, client, passed),
        body,
        signal,
        headersTimeout: upstream.timeoutMs,
        bodyTimeout: upstream.idleTimeoutMs,
      });
      setUpstreamHealth(upstream, true);
      upstream.observer?.requestDone(upstream.name, (performance.now() - started) / 1000, String(response.statusCode));
      return { response, upstream, body };
    } catch (err) {
      if (signal.aborted) throw err;
      const failure = new EngineRequestFailure(engineFailure(err), upstream.name, errorCode(err));
      upstream.observer?.requestDone(upstream.name, (performance.now() - started) / 1000, failure.code);
      if (!NOT_CONNECTED.has(errorCode(err))) throw failure;
      setUpstreamHealth(upstream, false, engineUnreachableCause(err));
      const next = candidates[i + 1];
      if (next === undefined) throw failure;
      upstream.observer?.failedOver(upstream.name, next.name);
    }
  }
}

/** postToEngines with one engine. */
export async function postToEngine(
  upstream: Upstream,
  enginePath: string,
  body: Buffer,
  client: IncomingHttpHeaders,
  signal: AbortSignal | EngineAbort,
): Promise<EngineResponse> {
  return (await postToEngines([upstream], enginePath, body, client, signal)).response;
}

/**
 * Reads a whole (non-stream) body, refusing more than `limit` bytes. With `declared` (the engine's
 * Content-Length), the body is copied into one buffer of that size as it arrives, so the chunks are
 * garbage at once and no second, joined copy is made. Plain 'data'/'end' listeners: the async iterator
 * of `for await` (createAsyncIterator, read(), eos) showed in the per-request profile. The listeners
 * stay on the finished body, which is dropped with them: removing them costs a removeListener each,
 * visible in the profile too.
 */
export function readEngineBody(response: EngineResponse, limit: number, declared?: number): Promise<Buffer> {
  const body = response.body;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const into = declared === undefined ? undefined : Buffer.allocUnsafe(declared);
    const cap = into === undefined ? limit : Math.min(limit, into.length);
    let size = 0;
    let settled = false;
    body.on('data', (chunk: Buffer) => {
      if (settled) return;
      if (size + chunk.length > cap) {
        settled = true;
        body.destroy();
        reject(
          new HttpError(
            'upstream_bad_response',
            size + chunk.length > limit ? 'The engine sent a response larger than Sigil accepts.' : 'The engine sent more bytes than its Content-Length.',
          ),
        );
        return;
      }
      if (into === undefined) chunks.push(chunk);
      else chunk.copy(into, size);
      size += chunk.length;
    });
    body.on('end', () => {
      if (settled) return;
      settled = true;
      if (into !== undefined) resolve(size === into.length ? into : into.subarray(0, size));
      else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    });
    body.on('error', (err: unknown) => {
      if (settled) return;
      settled = true;
      reject(engineFailure(err));
    });
  });
}

function engineMessage(bytes: Buffer): { message?: string; param?: string; code?: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch {
    return {};
  }
  if (parsed === null || typeof parsed !== 'object') return {};
  const top = parsed as Record<string, unknown>;
  const inner = (typeof top.error === 'object' && top.error !== null ? top.error : top) as Record<string, unknown>;
  const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
  const out: { message?: string; param?: string; code?: string } = {};
  const message = str(inner.message) ?? str(top.error) ?? str(top.detail);
  if (message !== undefined) out.message = message;
  const param = str(inner.param);
  if (param !== undefined) out.param = param;
  const code = str(inner.code);
  if (code !== undefined) out.code = code;
  return out;
}

/** docs/api.md#errors: the engine's refusal as the catalogue entry that carries it on, with its own message. */
/**
 * An engine's refusal in Sigil's error shape. With `rename`, the engine's own name of the model is
 * replaced by the catalogue id in its message: the client never learns what the engine calls it.
 */
export function engineErrorToHttp(status: number, bytes: Buffer, retryAfter: string | undefined, rename?: { engine: string; catalogue: string }): HttpError {
  const info = engineMessage(bytes);
  if (rename !== undefined && info.message !== undefined) info.message = info.message.split(rename.engine).join(rename.catalogue);
  return engineRefusal(status, info, retryAfter);
}
