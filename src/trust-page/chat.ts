import { Identity } from 'ehbp';
import { CLIENT_MAX_EVENT_BYTES, EventStreamLines } from '../protocol/event-stream-lines.ts';
import { brandHeaders } from '../protocol/brand-headers.ts';
import { exchangeReceiptNonce } from '../protocol/sealed-receipt.ts';
import { verifyExchange, type ExchangeVerification, type ReceiptContext } from '../verify/exchange.ts';
import { CHAT_APIS, type ChatApi, type ChatApiShape, type ChatMessage } from './chat-api.ts';
import { BoundedReadError } from '../verify/bounded-read.ts';
import { SigilError } from '../protocol/sigil-error.ts';

export type { ChatMessage } from './chat-api.ts';

export interface ChatOptions {
  /** Which API to speak; chat completions by default. */
  api?: ChatApi;
  base: string;
  apiKey: string;
  model: string;
  messages: ChatMessage[];
  /** The attested /.well-known/hpke-keys bytes; without them the request goes in the clear (development services only). */
  hpkeKeyConfig?: Uint8Array;
  /** What the verified service vouches for: every receipt is held to it by the verifier's one exchange check. */
  receipts: ReceiptContext;
  /** The operator's brand word in header names (docs/api.md); `Service` by default. */
  brand?: string;
  /** Called with each piece of the answer as it is decrypted. */
  onText(text: string): void;
  /** Default CHAT_MAX_TOKENS. */
  maxTokens?: number;
}

/** A bound on every answer: a model that never stops (the random demo model) would stream for as long as the engine lets it. */
export const CHAT_MAX_TOKENS = 256;

export interface ChatOutcome {
  reply: string;
  /** The endpoint the page asked, which the receipt's `endpoint` claim is held to. */
  path: string;
  encrypted: boolean;
  receiptId: string | null;
  /** The message receipt after the stream, checked over the exact bytes sent and received. */
  receipt: ExchangeVerification;
}

const encoder = new TextEncoder();

function randomNonce(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');
}

/** The service refused the page's chat, or ended its stream with an error event: its message, as it sent it. */
export class ChatRefused extends SigilError<'ERR_CHAT_REFUSED'> {
  constructor(message: string) {
    super('ERR_CHAT_REFUSED', message);
  }
}

/** The text of one SSE line of either API's stream, if it carries some; an error event (either API's shape has `error.message`) throws. */
function readDelta(api: ChatApiShape, line: string, onText: (t: string) => void): void {
  if (!line.startsWith('data:')) return;
  const data = line.slice(5).trim();
  if (data === '[DONE]' || data === '') return;
  try {
    const chunk = JSON.parse(data) as { error?: { message?: string } };
    if (chunk.error !== undefined) throw new ChatRefused(chunk.error.message ?? 'the stream failed');
    const text = api.textOf(chunk);
    if (text !== undefined && text !== '') onText(text);
  } catch (err) {
    if (err instanceof SyntaxError) return;
    throw err;
  }
}

async function errorMessage(response: Response): Promise<string> {
  try {
    const body = (await response.json()) as { error?: { message?: string } };
    return body.error?.message ?? `HTTP ${response.status}`;
  } catch {
    return `HTTP ${response.status}`;
  }
}

/**
 * Sends a streamed chat request (chat completions or Messages), encrypted with EHBP to the attested key when the service offers one,
 * renders the answer as it is decrypted, and verifies the message receipt over the exact plaintext bytes
 * this page sent and received (docs/receipts.md, docs/ehbp.md).
 */
export async function sendChat(options: ChatOptions): Promise<ChatOutcome> {
  const names = brandHeaders((options.brand ?? 'Service').trim() || 'Service');
  const api = CHAT_APIS[options.api ?? 'chat'];
  let nonce = randomNonce();
  const requestBytes = encoder.encode(api.body(options.model, options.messages, options.maxTokens ?? CHAT_MAX_TOKENS));
  const url = `${options.base.replace(/\/+$/, '').replace(/\/v1$/, '')}${api.path}`;
  const init: RequestInit = {
    method: 'POST',
    headers: {
      ...api.headers(options.apiKey),
      'content-type': 'application/json',
      [names.receipt]: 'true',
      // Sealed, the nonce never travels: both ends derive it from the request's HPKE context.
      ...(options.hpkeKeyConfig === undefined ? { [names.nonce]: nonce } : {}),
    },
    body: requestBytes,
  };
  let response: Response;
  if (options.hpkeKeyConfig !== undefined) {
    const identity = await Identity.unmarshalPublicConfig(options.hpkeKeyConfig);
    const sealed = await identity.encryptRequestWithContext(new Request(url, init));
    nonce = await exchangeReceiptNonce(sealed.context!.senderContext);
    const raw = await fetch(sealed.request);
    response = raw.headers.get('ehbp-response-nonce') === null ? raw : await identity.decryptResponseWithContext(raw, sealed.context!);
  } else {
    response = await fetch(url, init);
  }
  if (!response.ok || response.body === null) throw new ChatRefused(await errorMessage(response));

  const parts: Uint8Array[] = [];
  const lines = new EventStreamLines(CLIENT_MAX_EVENT_BYTES);
  let reply = '';
  const onText = (text: string) => {
    reply += text;
    options.onText(text);
  };
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    lines.push(value);
    while (lines.nextLine()) readDelta(api, lines.text(), onText);
    if (lines.overflow) {
      await reader.cancel();
      throw new BoundedReadError('ERR_READ_TOO_LARGE', 'a stream event', `the service sent a stream event larger than ${CLIENT_MAX_EVENT_BYTES} bytes`);
    }
  }
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }

  const receipt = await verifyExchange({ path: api.path, stream: true, nonce, model: options.model, request: requestBytes, response: all }, options.receipts);
  return {
    reply,
    path: api.path,
    encrypted: options.hpkeKeyConfig !== undefined,
    receiptId: receipt.claims?.receipt_id ?? response.headers.get(names.receiptId),
    receipt,
  };
}
