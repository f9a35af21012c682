import { createHash, randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpError } from '../../protocol/errors.ts';
import { editJsonObject, scanJsonObject } from '../../protocol/json-edit.ts';
import { parseJsonBody, upstreamBody, validateRequest, type ChatRequest } from '../chat-request.ts';
import type { EndpointDescription } from '../endpoints.ts';
import { readBody, requireJson } from '../read-body.ts';
import type { AppContext } from '../context.ts';
import type { RequestLog } from '../request-log.ts';
import { sealedExchangeOf } from '../ehbp.ts';
import { sealedReceiptTrailer } from '../../protocol/sealed-receipt.ts';
import type { Caller } from '../../auth/bearer.ts';
import { EngineAbort, engineErrorToHttp, postToEngines, readEngineBody, type EngineResponse } from '../../proxy/engine-request.ts';
import { selectUpstreams } from '../../proxy/select-upstream.ts';
import type { Upstream } from '../../proxy/upstream.ts';
import { teeSseStream } from '../../proxy/sse-relay.ts';
import { cacheSaltOf, withCacheSalt } from '../../proxy/cache-salt.ts';
import { messageReceiptClaims, modelReceiptClaims, type SelectedModel } from '../../receipts/claims.ts';
import { readReceiptRequest, type ReceiptRequest } from '../../receipts/request.ts';
import { budgetExhausted, type BudgetHold, type MemoryBudget } from '../../limits/memory-budget.ts';
import { endUnlessStalled } from '../stalled-reader.ts';

const ENGINE_ERROR_LIMIT = 1024 * 1024;

/** What every exchange on this server shares: the memory budget, and the signal that cuts streams when the shutdown grace ends. */
export interface ExchangeShared {
  buffers: MemoryBudget;
  streamsCut: AbortSignal;
}
/** The endpoints whose engine requests take vLLM's `cache_salt`. */
const SALTED_ENDPOINTS = new Set(['chat', 'completions']);

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
  /** This exchange's charge on the memory budget (its body, its buffered answer), released when the response closes. */
  hold: BudgetHold;
  streamsCut: AbortSignal;
  /** An EHBP exchange: its receipts travel in the sealed body, never in clear headers (docs/ehbp.md). */
  sealed: boolean;
}

/**
 * POST on a relayed endpoint (chat completions, completions, embeddings, responses): authenticate,
 * admit, validate, forward, relay, and sign on request. One pipeline; the endpoint's description
 * says what differs.
 */
export function createExchangeHandler(endpoint: EndpointDescription, shared: ExchangeShared) {
  return (req: IncomingMessage, res: ServerResponse, ctx: AppContext, log: RequestLog) => handleExchange(endpoint, shared, req, res, ctx, log);
}

async function handleExchange(
  endpoint: EndpointDescription,
  shared: ExchangeShared,
  req: IncomingMessage,
  res: ServerResponse,
  ctx: AppContext,
  log: RequestLog,
): Promise<void> {
  const started = performance.now();
  const caller = ctx.keyRing.authenticate(req.headers);
  const hold = shared.buffers.hold();
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
    hold.release();
  });
  const receipt = readReceiptRequest(req.headers, ctx.headers);
  requireJson(req);
  // The body is read before the slots are taken: a slow sender holds its own connection, never a slot another request could use.
  const raw = await readBody(req, ctx.config.limits.max_body_bytes, ctx.config.limits.body_timeout_ms, hold);
  const admission = await ctx.limits.admit(caller);
  release = admission.release;
  for (const [name, value] of Object.entries(admission.headers)) res.setHeader(name, value);
  if (closed) {
    release(0);
    return;
  }
  const sealed = sealedExchangeOf(req);
  // Sealed without a clear nonce: the nonce both ends derive from the HPKE context.
  if (sealed !== undefined && receipt.nonce === '') receipt.nonce = sealed.receiptNonce;
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
    hold,
    streamsCut: shared.streamsCut,
    sealed: sealed !== undefined,
  };
  // The model receipt is signed once: before generation when a stream was asked for (docs/receipts.md#the-two-receipts-and-where-they-travel), else
  // only if the engine streams anyway.
  let modelReceipt: Promise<string> | undefined;
  const modelReceiptOnce = () => (modelReceipt ??= signModelReceipt(exchange));
  // Sealed, the model receipt is not sent (no clear header may carry it); the message receipt ends the stream.
  if (receipt.wanted && chat.stream && !exchange.sealed) modelReceiptOnce();

  // Prefix-cache isolation: an engine that takes it keys its cache by this salt, one per API key (docs/configuration.md).
  const unsalted = exchange.forwarded;
  let salted: Buffer | undefined;
  const bodyFor = (u: Upstream) =>
    u.cacheSalt && SALTED_ENDPOINTS.has(endpoint.kind)
      ? (salted ??= withCacheSalt(unsalted, cacheSaltOf(caller), unsalted === raw ? chat.scan : undefined))
      : unsalted;
  const { response: engine, upstream, body: sent } = await postToEngines(candidates, endpoint.enginePath, bodyFor, req.headers, abort);
  exchange.forwarded = sent;
  log.upstream = upstream.name;
  if (engine.statusCode >= 300) {
    const bytes = await readEngineBody(engine, ENGINE_ERROR_LIMIT).catch(() => Buffer.alloc(0));
    const retryAfter = engine.headers['retry-after'];
    const rename = exchange.rewriteModel === undefined ? undefined : { engine: chat.model.upstream_model, catalogue: chat.model.id };
    throw engineErrorToHttp(engine.statusCode, bytes, typeof retryAfter === 'string' ? retryAfter : undefined, rename);
  }
  const type = String(engine.headers['content-type'] ?? '');
  if (type.startsWith('text/event-stream')) await relayStream(exchange, engine, receipt.wanted && !exchange.sealed ? modelReceiptOnce() : undefined);
  else await relayJson(exchange, engine);
}

function signModelReceipt(x: Exchange): Promise<string> {
  const jws = x.ctx.signReceipt(
    modelReceiptClaims(x.ctx.receiptContext, { receiptId: x.receiptId, model: x.selected, nonce: x.receipt.nonce, now: new Date() }),
  );
  // Signed while the engine starts: a failure surfaces where it is awaited, and is not left unhandled when the engine fails first.
  jws.catch(() => undefined);
  return jws;
}

async function signMessageReceipt(x: Exchange, completionId: string, responseHash: string): Promise<string> {
  const jws = await x.ctx.signReceipt(
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
  await x.ctx.receiptStore.put(x.receiptId, x.caller, jws);
  return jws;
}

async function relayStream(x: Exchange, engine: EngineResponse, modelReceipt: Promise<string> | undefined): Promise<void> {
  const { res, ctx } = x;
  const headers: Record<string, string> = {
    'content-type': String(engine.headers['content-type']),
    'cache-control': 'no-cache',
    'x-accel-buffering': 'no',
  };
  if (modelReceipt !== undefined) {
    headers[ctx.headers.receipt] = await modelReceipt;
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
    cut: x.streamsCut,
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

/**
 * Reads a non-streamed answer whole, charging it to the memory budget. With a Content-Length, its size is
 * charged before a byte is read (refused at once when it does not fit, so a refused answer costs nothing)
 * and the bytes go into one buffer of that size. Without one, it is charged twice as it arrives (the
 * chunks and the buffer they are joined into both exist for a moment). Once whole, twice more, for the
 * text and the value JSON.parse makes of it.
 */
async function readBufferedAnswer(x: Exchange, engine: EngineResponse): Promise<Buffer> {
  const limit = x.ctx.config.limits.max_answer_bytes;
  const declared = Number(engine.headers['content-length']);
  if (engine.headers['content-length'] !== undefined && Number.isSafeInteger(declared) && declared >= 0 && declared <= limit) {
    if (!x.hold.grow(declared)) {
      engine.body.destroy();
      throw budgetExhausted();
    }
    const bytes = await readEngineBody(engine, limit, declared);
    if (!x.hold.grow(2 * bytes.length)) throw budgetExhausted();
    return bytes;
  }
  let received = 0;
  let refuse: (error: HttpError) => void = () => undefined;
  const refused = new Promise<never>((_resolve, reject) => (refuse = reject));
  const onData = (chunk: Buffer) => {
    received += chunk.length;
    if (x.hold.grow(2 * chunk.length)) return;
    engine.body.off('data', onData);
    refuse(budgetExhausted());
    engine.body.destroy(new Error('memory budget exhausted'));
  };
  engine.body.on('data', onData);
  try {
    const bytes = await Promise.race([readEngineBody(engine, limit), refused]);
    if (!x.hold.grow(2 * received)) throw budgetExhausted();
    return bytes;
  } finally {
    engine.body.off('data', onData);
  }
}

async function relayJson(x: Exchange, engine: EngineResponse): Promise<void> {
  const bytes = await readBufferedAnswer(x, engine);
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
    if (!x.hold.grow(out.length)) throw budgetExhausted();
  }
  // Only the request and the bytes to send stay: the chunks, the text and the parsed value are garbage from here.
  x.hold.shrink(x.hold.held - out.length - x.raw.length);
  const usage = x.endpoint.readUsage(completion);
  if (usage !== undefined) x.log.usage = usage;
  const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': out.length };
  let trailer: string | undefined;
  if (x.receipt.wanted) {
    const completionId = typeof completion.id === 'string' ? completion.id : '';
    const jws = await signMessageReceipt(x, completionId, sha256(out));
    if (x.sealed) {
      trailer = sealedReceiptTrailer(jws);
    } else {
      headers[x.ctx.headers.receipt] = jws;
      headers[x.ctx.headers.receiptId] = x.receiptId;
    }
  }
  x.log.status = engine.statusCode;
  x.res.writeHead(engine.statusCode, headers);
  // Sealed, the receipt is the last frame, after the engine's bytes (the client splits them, docs/ehbp.md).
  endUnlessStalled(
    x.res,
    out,
    x.ctx.config.limits.client_read_timeout_ms,
    () => {
      x.log.error_code = 'client_read_timeout';
      x.ctx.logger.warn({ request_id: x.log.request_id, bytes: out.length }, 'client stopped reading a buffered answer: connection closed');
    },
    trailer,
  );
}
