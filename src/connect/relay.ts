import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AttestedFetch } from '../client/index.ts';
import { anthropicErrorBody, anthropicSseErrorEvent } from '../protocol/anthropic-error.ts';
import { HttpError, sseErrorEvent } from '../protocol/errors.ts';
import { isBoundedReadError, readResponseBounded } from '../verify/bounded-read.ts';
import { isJsonContentType } from '../verify/service.ts';
import { relayEventStream } from './stream-relay.ts';
import { connectErrorOf } from './verification-error.ts';

/** Headers that belong to one hop, or that the attested client sets itself (it asks for identity encoding: receipts hash the bytes). */
const HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'host',
  'content-length',
  'accept-encoding',
  'expect',
]);
/** Not passed back: the body is already opened and re-framed here. */
const ANSWER_HOP = new Set([...HOP, 'content-encoding', 'ehbp-response-nonce']);

export const MAX_REQUEST_BYTES = 32 * 1024 * 1024;
/** A JSON answer is held whole until its receipt verifies: 64 MiB is far past any completion or embedding list. */
export const DEFAULT_MAX_ANSWER_BYTES = 64 * 1024 * 1024;
/** The OpenAI API and Sigil's own endpoints read with GET and write with POST; nothing else is relayed. */
const RELAYED_METHODS = new Set(['GET', 'POST']);
/** Never passed back: connect answers no other origin (docs/connect.md, "Who can use it"). */
const isCorsHeader = (name: string) => name.startsWith('access-control-');

/** Whether the app speaks Anthropic's Messages API on this path: its errors then take that API's shape (docs/api.md#anthropic-messages). */
export function isMessagesPath(url: string | undefined): boolean {
  return /^\/v1\/messages(?:\/count_tokens)?\/?(?:\?|$)/.test(url ?? '');
}

export function sendError(res: ServerResponse, error: HttpError, url?: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(isMessagesPath(url) ? anthropicErrorBody(error) : error.toJSON());
  res.writeHead(error.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_REQUEST_BYTES) throw new HttpError('request_too_large', `sigil connect takes request bodies of at most ${MAX_REQUEST_BYTES} bytes.`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

function forwardedHeaders(req: IncomingMessage, serviceApiKey: string | undefined): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || HOP.has(name)) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  if (serviceApiKey !== undefined) headers.set('authorization', `Bearer ${serviceApiKey}`);
  return headers;
}

/** Only the methods the API uses, and a body only as JSON: a browser form's text/plain POST is not an API call. */
function checkRequest(req: IncomingMessage, method: string): void {
  if (!RELAYED_METHODS.has(method)) throw new HttpError('method_not_allowed', `sigil connect relays GET and POST only, not ${method}.`);
  if (method === 'POST' && !isJsonContentType(req.headers['content-type']))
    throw new HttpError('unsupported_media_type', 'sigil connect relays request bodies of Content-Type application/json only.', { param: 'Content-Type' });
}

export interface RelayTarget {
  fetch: AttestedFetch;
  /** The service's origin and path prefix, e.g. `https://inference.example.com`: the app's path is appended. */
  origin: string;
  /** Refuse a POST whose body would go unsealed (the service offers no attested HPKE key), unless the user allowed it. */
  requireSealedBodies: boolean;
  /** The largest JSON answer held for its receipt; default DEFAULT_MAX_ANSWER_BYTES. */
  maxAnswerBytes?: number;
  /** Sent to the service instead of the app's key (connect beyond loopback, where the app sends the local token). */
  serviceApiKey?: string;
}

/**
 * One app request through the attested client: its headers (the API key included) and body as the app sent them, the
 * body sealed and the receipt verified by the client; the answer passed on only once verified (JSON), or event by event
 * with the final event held for the receipt (streams). Whatever fails verification reaches the app as an error.
 */
export async function relay(target: RelayTarget, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const method = req.method ?? 'GET';
  checkRequest(req, method);
  const body = method === 'GET' || method === 'HEAD' ? undefined : await readBody(req);
  if (method === 'POST' && target.requireSealedBodies && target.fetch.attestation.hpkeKeyConfig === null)
    throw new HttpError(
      'attestation_failed',
      'sigil connect sent nothing: the service offers no attested HPKE key, so the body would not be sealed (--allow-unsealed-bodies accepts that)',
      { param: 'attestation.hpke_key' },
    );
  let answer: Response;
  try {
    answer = await target.fetch(`${target.origin}${req.url ?? '/'}`, {
      method,
      headers: forwardedHeaders(req, target.serviceApiKey),
      ...(body === undefined || body.length === 0 ? {} : { body: new Uint8Array(body.buffer, body.byteOffset, body.length) as unknown as BodyInit }),
    });
  } catch (err) {
    throw connectErrorOf(err);
  }
  const headers: Record<string, string> = {};
  answer.headers.forEach((value, name) => {
    if (!ANSWER_HOP.has(name) && !isCorsHeader(name)) headers[name] = value;
  });
  const stream = (answer.headers.get('content-type') ?? '').startsWith('text/event-stream');
  if (answer.body === null) {
    res.writeHead(answer.status, headers);
    res.end();
    return;
  }
  if (stream) {
    res.writeHead(answer.status, { ...headers, 'cache-control': 'no-cache' });
    res.flushHeaders();
    await relayEventStream(answer.body, res, { errorEvent: isMessagesPath(req.url) ? anthropicSseErrorEvent : sseErrorEvent });
    return;
  }
  const maxBytes = target.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES;
  if (!isJsonContentType(answer.headers.get('content-type'))) {
    await answer.body.cancel().catch(() => undefined);
    throw new HttpError(
      'upstream_bad_response',
      `sigil connect did not pass this answer on: it came as ${answer.headers.get('content-type') ?? 'no content type'}, neither JSON nor an event stream.`,
    );
  }
  let bytes: Buffer;
  try {
    bytes = await readResponseBounded(answer, { what: "the service's answer", maxBytes });
  } catch (err) {
    if (isBoundedReadError(err))
      throw new HttpError(
        'upstream_bad_response',
        `sigil connect did not pass this answer on: ${err.message} (sigil connect --max-answer-mib raises the cap).`,
      );
    throw connectErrorOf(err);
  }
  res.writeHead(answer.status, { ...headers, 'content-length': String(bytes.length) });
  res.end(bytes);
}
