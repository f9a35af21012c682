import { request, type Dispatcher } from 'undici';
import { brandHeaders } from '../protocol/brand-headers.ts';
import { readBounded } from './bounded-read.ts';
import { VerifyError } from './errors.ts';
import { errorSummary, fetchJson, serviceUrl } from './service.ts';
import { splitReceiptStream } from './stream-receipt.ts';
import { streamEndingOf } from '../protocol/stream-ending.ts';

/** The APIs a live exchange can use: OpenAI's chat completions, or Anthropic's Messages API (docs/api.md#anthropic-messages). */
export type LiveApi = 'chat' | 'messages';

/** Where each API's requests go: the path a receipt's `endpoint` must name. */
export const LIVE_API_PATHS: Readonly<Record<LiveApi, string>> = { chat: '/v1/chat/completions', messages: '/v1/messages' };

export interface LiveRequestOptions {
  baseUrl: string;
  apiKey: string;
  model: string;
  stream: boolean;
  /** Default `chat`. */
  api?: LiveApi;
  /** Sent as X-<Brand>-Nonce. */
  nonce: string;
  /** The brand word in header names; default "Service". */
  brand?: string;
  prompt?: string;
  maxTokens?: number;
  /** The connection pool to send through (a TLS-pinned one for https). */
  dispatcher?: Dispatcher;
}

/** One chat completion, with the exact bytes each way and the receipts it carried. */
export interface LiveExchange {
  requestBytes: Uint8Array;
  /** JSON: the whole body. Stream: up to and including `data: [DONE]\n\n`. */
  responseBytes: Uint8Array;
  /** The message receipt (JSON: the receipt header; stream: the trailing comment or GET /v1/receipts/{id}). */
  receipt: string;
  /** Streams only: the model receipt of the receipt header. */
  modelReceipt?: string;
  receiptId?: string;
  /** The response's `id` (JSON body, or the stream's first chunk). */
  completionId?: string;
  /** Where the message receipt came from, for the report. */
  receiptSource: 'header' | 'stream comment' | 'receipts endpoint';
}

const TIMEOUT_MS = 300_000;
/** The test request asks for a few tokens: an answer of 16 MiB is not one. */
const LIVE_ANSWER_MAX_BYTES = 16 * 1024 * 1024;

function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const value = headers[name.toLowerCase()];
  return Array.isArray(value) ? value[0] : value;
}

function firstChunkId(body: Uint8Array): string | undefined {
  for (const line of Buffer.from(body)
    .toString('utf8')
    .split(/\r\n|\r|\n/)) {
    if (!line.startsWith('data:')) continue;
    try {
      const event = JSON.parse(line.slice(5)) as { id?: unknown; message?: { id?: unknown } };
      // A Messages stream names its message in `message_start`, under `message`.
      const id = event.id ?? event.message?.id;
      if (typeof id === 'string') return id;
    } catch {
      // [DONE] or a non-JSON event
    }
  }
  return undefined;
}

function jsonId(body: Uint8Array): string | undefined {
  try {
    const id = (JSON.parse(Buffer.from(body).toString('utf8')) as { id?: unknown }).id;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}

/** The first model the service lists (GET /v1/models), for when the user names none. */
export async function firstListedModel(baseUrl: string, dispatcher?: Dispatcher): Promise<string> {
  const list = (await fetchJson(serviceUrl(baseUrl, 'v1/models'), {}, dispatcher)) as { data?: Array<{ id?: unknown }> };
  const id = list.data?.[0]?.id;
  if (typeof id !== 'string') throw new VerifyError('ERR_VERIFY_FETCH', 'GET /v1/models lists no model; pass --model');
  return id;
}

/**
 * Sends a chat completion asking for a receipt, keeping the request bytes exactly as sent and the
 * response bytes exactly as received (no decompression: no Accept-Encoding is sent).
 */
export async function sendChatWithReceipt(opts: LiveRequestOptions): Promise<LiveExchange> {
  const brand = opts.brand ?? 'Service';
  const names = brandHeaders(brand);
  const api = opts.api ?? 'chat';
  // The same request in either API: one user message, a small max_tokens.
  const requestBytes = Buffer.from(
    JSON.stringify({
      model: opts.model,
      messages: [{ role: 'user', content: opts.prompt ?? 'Reply with one short sentence.' }],
      max_tokens: opts.maxTokens ?? 32,
      stream: opts.stream,
    }),
  );
  const url = serviceUrl(opts.baseUrl, LIVE_API_PATHS[api].slice(1));
  const apiHeaders: Record<string, string> =
    api === 'messages' ? { 'x-api-key': opts.apiKey, 'anthropic-version': '2023-06-01' } : { authorization: `Bearer ${opts.apiKey}` };
  let status: number;
  let headers: Record<string, string | string[] | undefined>;
  let responseBytes: Buffer;
  try {
    const response = await request(url, {
      method: 'POST',
      headers: {
        ...apiHeaders,
        'content-type': 'application/json',
        accept: opts.stream ? 'text/event-stream' : 'application/json',
        [names.receipt]: 'true',
        [names.nonce]: opts.nonce,
      },
      body: requestBytes,
      headersTimeout: TIMEOUT_MS,
      bodyTimeout: TIMEOUT_MS,
      ...(opts.dispatcher === undefined ? {} : { dispatcher: opts.dispatcher }),
    });
    status = response.statusCode;
    headers = response.headers;
    responseBytes = await readBounded(response.body, { what: 'the answer to the test request', maxBytes: LIVE_ANSWER_MAX_BYTES });
  } catch (err) {
    throw new VerifyError('ERR_VERIFY_FETCH', `POST ${url.href}: ${(err as Error).message}`);
  }
  if (status !== 200) throw new VerifyError('ERR_VERIFY_FETCH', `POST ${url.href}: ${errorSummary(status, responseBytes.toString('utf8'))}`);
  if (header(headers, 'content-encoding') !== undefined) {
    throw new VerifyError('ERR_VERIFY_FETCH', 'the response is content-encoded; its bytes are not the ones the receipt hashes');
  }

  const receiptHeader = header(headers, names.receipt);
  const receiptId = header(headers, names.receiptId);
  const withId = (x: LiveExchange): LiveExchange => (receiptId === undefined ? x : { ...x, receiptId });
  if (!opts.stream) {
    if (receiptHeader === undefined) throw new VerifyError('ERR_VERIFY_FETCH', `the response carries no X-${brand}-Receipt header`);
    const completionId = jsonId(responseBytes);
    const exchange: LiveExchange = { requestBytes, responseBytes, receipt: receiptHeader, receiptSource: 'header' };
    if (completionId !== undefined) exchange.completionId = completionId;
    return withId(exchange);
  }

  let exchange: LiveExchange;
  try {
    const split = splitReceiptStream(responseBytes, { ending: streamEndingOf(LIVE_API_PATHS[api]) });
    exchange = { requestBytes, responseBytes: split.body, receipt: split.receipt, receiptSource: 'stream comment' };
  } catch (err) {
    // docs/receipts.md: the same message receipt is kept at GET /v1/receipts/{id} for a while.
    if (receiptId === undefined) throw err;
    let stored: { receipt?: unknown };
    try {
      stored = (await fetchJson(
        serviceUrl(opts.baseUrl, `v1/receipts/${encodeURIComponent(receiptId)}`),
        {
          authorization: `Bearer ${opts.apiKey}`,
        },
        opts.dispatcher,
      )) as { receipt?: unknown };
    } catch (fetchErr) {
      throw new VerifyError('ERR_VERIFY_STREAM', `${(err as Error).message}, and the receipts endpoint has none (${(fetchErr as Error).message})`);
    }
    if (typeof stored.receipt !== 'string') throw err;
    exchange = { requestBytes, responseBytes, receipt: stored.receipt, receiptSource: 'receipts endpoint' };
  }
  if (receiptHeader !== undefined) exchange.modelReceipt = receiptHeader;
  const completionId = firstChunkId(exchange.responseBytes);
  if (completionId !== undefined) exchange.completionId = completionId;
  return withId(exchange);
}
