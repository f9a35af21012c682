import { createHash, randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpError } from '../../protocol/errors.ts';
import { editJsonObject, scanJsonObject } from '../../protocol/json-edit.ts';
import { parseJsonBody, upstreamBody, validateRequest, type ChatRequest } from '../chat-request.ts';
import type { EndpointDescription } from '../endpoints.ts';
import { readBody, requireJson } from '../read-body.ts';
import type { AppContext } from '../context.ts';
import type { RequestLog } from '../request-log.ts';
import type { Caller } from '../../auth/bearer.ts';
import { EngineAbort, engineErrorToHttp, postToEngines, readEngineBody, type EngineResponse } from '../../proxy/engine-request.ts';
import { selectUpstreams } from '../../proxy/select-upstream.ts';
import { teeSseStream } from '../../proxy/sse-relay.ts';
import { messageReceiptClaims, modelReceiptClaims, type SelectedModel } from '../../receipts/claims.ts';
import { readReceiptRequest, type ReceiptRequest } from '../../receipts/request.ts';

const ENGINE_ERROR_LIMIT = 1024 * 1024;
const ENGINE_JSON_LIMIT = 64 * 1024 * 1024;

const sha256 = (bytes: Buffer) => 'sha256:' + createHash('sha256').update(bytes).digest('hex');

interface Exchange {
  endpoint: EndpointDescription;
  started: number;
  ctx: AppContext;
  res: ServerResponse;
  log: RequestLog;
  caller: Caller;
  chat: ChatRequest;
  raw: Buffer;
  receipt: ReceiptRequest;
  receiptId: string;
  selected: SelectedModel;
  /** The catalogue id to write back into responses when the engine's name differs. */
  rewriteModel: string | undefined;
  /** The bytes the engine gets: `raw` itself, or `raw` with only the model value and extension fields edited. */
  forwarded: Buffer;
}

/**
 * POST on a relayed endpoint (chat completions, completions, embeddings, responses): authenticate,
 * admit, validate, forward, relay, and sign on request. One pipeline; the endpoint's description
 * says what differs.
 */
export function createExchangeHandler(endpoint: EndpointDescription) {
  return (req: IncomingMessage, res: ServerResponse, ctx: AppContext, log: RequestLog) => handleExchange(endpoint, req, res, ctx, log);
}

async function handleExchange(endpoint: EndpointDescription, req: IncomingMessage, res: ServerResponse, ctx: AppContext, log: RequestLog): Promise<void> {
  const started = performance.now();
  const caller = ctx.keyRing.authenticate(req.headers);
  // The exchange's one close listener, attached before admit resolves (a client that leaves while a
  // shared counter answers still frees its slot): it cancels the engine request if the response did
  // not finish, and releases the slots with the tokens the engine reported.
  const abort = new EngineAbort();
  let release: ((tokensUsed: number) => void) | undefined;
  let closed = false;
  res.once('close', () => {
    closed = true;
    if (!res.writableFinished) abort.abort();
    release?.(log.usage ? log.usage.prompt_tokens + log.usage.completion_tokens : 0);
  });
  const admission = await ctx.limits.admit(caller);
  release = admission.release;
  for (const [name, value] of Object.entries(admission.headers)) res.setHeader(name, value);
  if (closed) {
    release(0);
    return;
  }
  const receipt = readReceiptRequest(req.headers, ctx.headers);
  requireJson(req);
  const raw = await readBody(req, ctx.config.limits.max_body_bytes, ctx.config.limits.body_timeout_ms);
  const chat = validateRequest(parseJsonBody(raw), ctx.catalogue, endpoint);
  log.model = chat.model.id;
  log.stream = chat.stream;
  log.receipt = receipt.wanted;
  log.key_id = caller.keyId;
  const candidates = selectUpstreams(chat.model, ctx.upstreams, chat.region, ctx.config.routing.strict_regions);

  const exchange: Exchange = {
    endpoint,
    started,
    ctx,
    res,
    log,
    caller,
    chat,
    raw,
    receipt,
    receiptId: receipt.wanted ? randomUUID() : '',
    selected: { provider: chat.model.provider, model_id: chat.model.id, model_hash: chat.model.model_hash },
    rewriteModel: chat.model.upstream_model === chat.model.id ? undefined : chat.model.id,
    forwarded: upstreamBody(raw, chat),
  };
  // The model receipt is signed once: before generation when a stream was asked for (SPEC 3), else
  // only if the engine streams anyway.
  let modelReceipt: string | undefined;
  const modelReceiptOnce = () => (modelReceipt ??= signModelReceipt(exchange));
  if (receipt.wanted && chat.stream) modelReceiptOnce();

  const { response: engine, upstream } = await postToEngines(candidates, endpoint.enginePath, exchange.forwarded, req.headers, abort);
  log.upstream = upstream.name;
  if (engine.statusCode >= 300) {
    const bytes = await readEngineBody(engine, ENGINE_ERROR_LIMIT).catch(() => Buffer.alloc(0));
    const retryAfter = engine.headers['retry-after'];
    throw engineErrorToHttp(engine.statusCode, bytes, typeof retryAfter === 'string' ? retryAfter : undefined);
  }
  const type = String(engine.headers['content-type'] ?? '');
  if (type.startsWith('text/event-stream')) await relayStream(exchange, engine, receipt.wanted ? modelReceiptOnce() : undefined);
  else await relayJson(exchange, engine);
}

function signModelReceipt(x: Exchange): string {
  return x.ctx.signReceipt(
    modelReceiptClaims(x.ctx.receiptContext, { receiptId: x.receiptId, model: x.selected, nonce: x.receipt.nonce, now: new Date() }),
  );
}

async function signMessageReceipt(x: Exchange, completionId: string, responseHash: string): Promise<string> {
  const jws = x.ctx.signReceipt(
    messageReceiptClaims(x.ctx.receiptContext, {
      receiptId: x.receiptId,
      model: x.selected,
      nonce: x.receipt.nonce,
      now: new Date(),
      completionId,
      requestHash: sha256(x.raw),
      ...(x.forwarded === x.raw ? {} : { forwardedRequestHash: sha256(x.forwarded) }),
      responseHash,
    }),
  );
  await x.ctx.receiptStore.put(x.receiptId, x.caller.keyHash, jws);
  return jws;
}

async function relayStream(x: Exchange, engine: EngineResponse, modelReceipt: string | undefined): Promise<void> {
  const { res, ctx } = x;
  const headers: Record<string, string> = {
    'content-type': String(engine.headers['content-type']),
    'cache-control': 'no-cache',
    'x-accel-buffering': 'no',
  };
  if (modelReceipt !== undefined) {
    headers[ctx.headers.receipt] = modelReceipt;
    headers[ctx.headers.receiptId] = x.receiptId;
  }
  res.writeHead(200, headers);
  // With the engine's first chunk already here, the headers leave with it (one write instead of two);
  // otherwise they leave now, so the client sees the stream start as soon as the engine's did.
  if (engine.body.readableLength === 0) res.flushHeaders();
  x.log.status = 200;

  ctx.metrics.activeStreams.inc();
  const relay = teeSseStream({
    source: engine.body,
    sink: res,
    rewriteModel: x.rewriteModel,
    forReceipt: x.receipt.wanted,
    maxEventBytes: ctx.config.limits.max_sse_event_bytes,
    completion: x.endpoint.completion,
    readUsage: x.endpoint.readUsage,
  });
  // Attached after the relay's own listener, so it fires once the first chunk has been written.
  engine.body.once('data', () => (x.log.ttft_s = (performance.now() - x.started) / 1000));
  const result = await relay.finally(() => ctx.metrics.activeStreams.dec());
  if (result.droppedReceiptComments > 0) ctx.metrics.engineReceiptComments.inc(result.droppedReceiptComments);
  if (result.usage) x.log.usage = result.usage;
  if (result.error) x.log.error_code = result.error.code;
  if (result.clientGone) x.log.error_code = 'client_closed';
  if (!result.complete) return;
  if (x.receipt.wanted) {
    const jws = await signMessageReceipt(x, result.completionId ?? '', result.responseHash!);
    res.end(`: receipt ${jws}\n\n`);
  } else {
    res.end();
  }
}

async function relayJson(x: Exchange, engine: EngineResponse): Promise<void> {
  const bytes = await readEngineBody(engine, ENGINE_JSON_LIMIT);
  let completion: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(bytes.toString('utf8'));
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object');
    completion = parsed as Record<string, unknown>;
  } catch {
    throw new HttpError('upstream_bad_response', 'The engine sent a response that is not valid JSON.');
  }
  let out = bytes;
  if (x.rewriteModel !== undefined && 'model' in completion) {
    const scan = scanJsonObject(bytes);
    if (scan.duplicate !== undefined) throw new HttpError('upstream_bad_response', 'The engine sent a response with a key twice in one object.');
    // Only the model value changes: the engine's other bytes (its numbers above all) reach the client as sent.
    out = editJsonObject(bytes, scan, { set: { model: JSON.stringify(x.rewriteModel) } });
  }
  const usage = x.endpoint.readUsage(completion);
  if (usage !== undefined) x.log.usage = usage;
  const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': out.length };
  if (x.receipt.wanted) {
    const completionId = typeof completion.id === 'string' ? completion.id : '';
    headers[x.ctx.headers.receipt] = await signMessageReceipt(x, completionId, sha256(out));
    headers[x.ctx.headers.receiptId] = x.receiptId;
  }
  x.log.status = engine.statusCode;
  x.res.writeHead(engine.statusCode, headers);
  x.res.end(out);
}
