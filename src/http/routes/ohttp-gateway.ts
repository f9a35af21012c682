/**
 * The Oblivious HTTP gateway (docs/ohttp.md; RFC 9458, RFC 9540, draft-ietf-ohai-chunked-ohttp): GET serves the key
 * configuration the attestation binds, POST opens an encapsulated request and serves the binary HTTP request inside
 * through this same server, in process, as any request is served (auth, limits, receipts, the log), then seals the
 * answer back, a stream chunk by chunk as its events leave. The relay in front sees who asks and not what; this
 * process sees what is asked and only the relay's address.
 */
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { duplexPair } from 'node:stream';
import type { AppContext } from '../context.ts';
import { HttpError, httpError } from '../../protocol/errors.ts';
import { BinaryHttpError, decodeRequest, encodeResponse, indeterminateResponse, type BinaryRequest, type FieldLine } from '../../protocol/bhttp.ts';
import {
  CHUNKED_REQUEST_MEDIA_TYPE,
  CHUNKED_RESPONSE_MEDIA_TYPE,
  encodeKeyConfigs,
  GATEWAY_PATH,
  KEY_CONFIG_PROBLEM_TYPE,
  KEYS_MEDIA_TYPE,
  parseKeyConfig,
  REQUEST_MEDIA_TYPE,
  RESPONSE_MEDIA_TYPE,
  type Framing,
} from '../../protocol/ohttp.ts';
import { GatewayRefusal, ObliviousGateway, type GatewayResponse } from '../../ohttp/gateway.ts';
import { readBody } from '../read-body.ts';
import { markObliviousSocket } from '../oblivious-requests.ts';
import type { EhbpServerKey } from '../../ehbp/server-key.ts';
import { hash } from 'node:crypto';

type RequestListener = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

/** Fields a binary request may not carry into this server: they describe a connection, not the request. */
const CONNECTION_FIELDS = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'host', 'content-length']);
/** Fields of the inner answer left out of the binary response: they describe the in-process connection. */
const ANSWER_CONNECTION_FIELDS = new Set(['connection', 'keep-alive', 'transfer-encoding']);

const gateways = new WeakMap<EhbpServerKey, { gateway: ObliviousGateway; keys: Buffer }>();

/** The gateway of the enclave's HPKE key, made once per key (a reload that keeps the key keeps it). */
function gatewayOf(ctx: AppContext): { gateway: ObliviousGateway; keys: Buffer } {
  if (ctx.ehbp === undefined) throw httpError('not_found', 'The Oblivious HTTP gateway needs encrypted bodies (EHBP), which are off on this service.');
  const key = ctx.ehbp.key;
  let made = gateways.get(key);
  if (made === undefined) {
    made = { gateway: new ObliviousGateway(key.privateKey, ctx.ehbp.keyConfig), keys: Buffer.from(encodeKeyConfigs([parseKeyConfig(ctx.ehbp.keyConfig)])) };
    gateways.set(key, made);
  }
  return made;
}

/** GET /.well-known/ohttp-gateway: `application/ohttp-keys`, the one configuration the binding states as `hpke_key_config`. */
export function handleGatewayKeys(req: IncomingMessage, res: ServerResponse, ctx: AppContext): void {
  const { keys } = gatewayOf(ctx);
  res.writeHead(200, { 'content-type': KEYS_MEDIA_TYPE, 'content-length': keys.length, 'cache-control': 'no-cache' });
  res.end(req.method === 'HEAD' ? undefined : keys);
}

/** POST /.well-known/ohttp-gateway: `dispatch` serves the opened request through this server's own handler. */
export function createGatewayHandler(listener: () => RequestListener) {
  let dispatch: ((request: BinaryRequest) => Promise<IncomingMessage>) | undefined;
  return async (req: IncomingMessage, res: ServerResponse, ctx: AppContext): Promise<void> => {
    dispatch ??= inProcessDispatch(listener());
    const framing = framingOf(req.headers['content-type']);
    const { gateway } = gatewayOf(ctx);
    // The encapsulation adds at most a few hundred bytes a chunk to the body it carries.
    const body = await readBody(req, ctx.config.limits.max_body_bytes * 2 + 65_536, ctx.config.limits.body_timeout_ms);
    let opened;
    try {
      opened = gateway.open(body, framing);
    } catch (error) {
      if (error instanceof GatewayRefusal && error.keyConfig) {
        throw new HttpError('ohttp_key_config', error.message, { problemType: KEY_CONFIG_PROBLEM_TYPE });
      }
      if (error instanceof GatewayRefusal) throw new HttpError('ohttp_invalid_request', error.message);
      throw error;
    }
    // Claimed only once the request opened: a forged one cannot fill the window EHBP shares.
    const verdict = await ctx.ehbp!.replays.claim(hash('sha256', opened.enc));
    if (verdict !== 'fresh') {
      const status = verdict === 'replayed' ? 409 : 503;
      const message = verdict === 'replayed' ? 'This encapsulated request was already received.' : 'Too many encrypted requests to remember right now.';
      return sealAnswer(res, opened.response, framing, status, message);
    }
    let inner: BinaryRequest;
    try {
      inner = checkedRequest(decodeRequest(opened.request));
    } catch (error) {
      if (!(error instanceof BinaryHttpError)) throw error;
      return sealAnswer(res, opened.response, framing, 400, `The encapsulated request is not a valid binary HTTP request: ${error.message}.`);
    }
    const answer = await dispatch(inner);
    await relayAnswer(answer, res, opened.response, framing);
  };
}

function framingOf(contentType: string | undefined): Framing {
  const type = contentType?.split(';')[0]?.trim().toLowerCase();
  if (type === REQUEST_MEDIA_TYPE) return 'whole';
  if (type === CHUNKED_REQUEST_MEDIA_TYPE) return 'chunked';
  throw httpError('unsupported_media_type', `The gateway takes ${REQUEST_MEDIA_TYPE} or ${CHUNKED_REQUEST_MEDIA_TYPE}.`);
}

/** RFC 9458 §5.1 and §5.2: no 100-continue; and no gateway inside the gateway. */
function checkedRequest(request: BinaryRequest): BinaryRequest {
  if (request.headers.some(([name, value]) => name === 'expect' && value.toLowerCase() === '100-continue')) {
    throw new BinaryHttpError('it asks for 100-continue, which Oblivious HTTP cannot carry');
  }
  if (request.path.split('?')[0] === GATEWAY_PATH) throw new BinaryHttpError('it is addressed to the gateway itself');
  return request;
}

/**
 * Serves a request through `listener` without a network: a socket pair, one end handed to an HTTP server that never
 * listens, the other written by Node's own client. The server and its parser are Node's, as for any request.
 */
function inProcessDispatch(listener: RequestListener): (request: BinaryRequest) => Promise<IncomingMessage> {
  const server = createServer(listener);
  return (request) =>
    new Promise((resolve, reject) => {
      const [client, serverSide] = duplexPair();
      markObliviousSocket(serverSide);
      server.emit('connection', serverSide);
      const headers: Record<string, string | string[]> = { host: request.authority === '' ? 'ohttp-gateway' : request.authority };
      for (const [name, value] of request.headers) {
        if (CONNECTION_FIELDS.has(name)) continue;
        const kept = headers[name];
        headers[name] = kept === undefined ? value : [...(Array.isArray(kept) ? kept : [kept]), value];
      }
      headers['content-length'] = String(request.content.length);
      const sent = httpRequest({ method: request.method, path: request.path, headers, createConnection: () => client }, resolve);
      sent.on('error', reject);
      sent.end(request.content);
    });
}

function answerFields(answer: IncomingMessage): FieldLine[] {
  const fields: FieldLine[] = [];
  for (let i = 0; i < answer.rawHeaders.length; i += 2) {
    const name = answer.rawHeaders[i]!.toLowerCase();
    if (!ANSWER_CONNECTION_FIELDS.has(name)) fields.push([name, answer.rawHeaders[i + 1]!]);
  }
  return fields;
}

/**
 * The inner answer, sealed: whole, once it has all arrived; chunked, the head and then each piece as it comes, so a
 * stream reaches the client event by event. An answer cut short ends without the final chunk, which the client
 * reads as cut.
 */
async function relayAnswer(answer: IncomingMessage, res: ServerResponse, sealer: GatewayResponse, framing: Framing): Promise<void> {
  if (framing === 'whole') {
    const pieces: Buffer[] = [];
    for await (const piece of answer) pieces.push(piece as Buffer);
    const sealed = sealer.whole(encodeResponse({ status: answer.statusCode ?? 502, headers: answerFields(answer), content: Buffer.concat(pieces) }));
    res.writeHead(200, { 'content-type': RESPONSE_MEDIA_TYPE, 'content-length': sealed.length, 'cache-control': 'no-store' });
    res.end(sealed);
    return;
  }
  res.writeHead(200, { 'content-type': CHUNKED_RESPONSE_MEDIA_TYPE, incremental: '?1', 'cache-control': 'no-store' });
  res.write(sealer.start());
  res.write(sealer.chunk(indeterminateResponse.head(answer.statusCode ?? 502, answerFields(answer))));
  res.once('close', () => answer.destroy());
  try {
    for await (const piece of answer) res.write(sealer.chunk(indeterminateResponse.chunk(piece as Buffer)));
  } catch {
    res.destroy();
    return;
  }
  res.end(sealer.final(indeterminateResponse.end()));
}

/** An error found after the request opened is the client's alone to read: sealed as an OpenAI-shaped answer. */
function sealAnswer(res: ServerResponse, sealer: GatewayResponse, framing: Framing, status: number, message: string): void {
  const content = Buffer.from(JSON.stringify({ error: { message, type: 'invalid_request_error', param: null, code: 'ohttp_inner_request' } }));
  const fields: FieldLine[] = [['content-type', 'application/json']];
  if (framing === 'whole') {
    const sealed = sealer.whole(encodeResponse({ status, headers: fields, content }));
    res.writeHead(200, { 'content-type': RESPONSE_MEDIA_TYPE, 'content-length': sealed.length, 'cache-control': 'no-store' });
    res.end(sealed);
    return;
  }
  res.writeHead(200, { 'content-type': CHUNKED_RESPONSE_MEDIA_TYPE, 'cache-control': 'no-store' });
  res.write(sealer.start());
  res.write(sealer.chunk(indeterminateResponse.head(status, fields)));
  res.end(sealer.final(Buffer.concat([indeterminateResponse.chunk(content), indeterminateResponse.end()])));
}
