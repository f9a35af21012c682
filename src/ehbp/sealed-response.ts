import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { EhbpExchange } from './request-open.ts';
import { RESPONSE_NONCE_HEADER } from './suite.ts';

type Headers = OutgoingHttpHeaders | Array<string | string[]> | undefined;

const EMPTY = Buffer.alloc(0);

function withoutLength(headers: Headers): Headers {
  if (headers === undefined || Array.isArray(headers)) return headers;
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) if (name.toLowerCase() !== 'content-length') out[name] = value;
  return out;
}

/**
 * Seals everything written to `res` from now on (the EHBP specification §5.2): each write becomes one frame, sealed and
 * written at once (an SSE event leaves as it arrives, never held back); the status and the headers stay
 * readable (receipts, rate limits), Content-Length goes (the framing changes the length) and
 * `Ehbp-Response-Nonce` is added. The route code above keeps writing plaintext, so receipts hash the
 * plaintext (docs/ehbp.md).
 */
export function sealResponse(res: ServerResponse, exchange: EhbpExchange): void {
  res.setHeader(RESPONSE_NONCE_HEADER, exchange.responseNonce);
  const writeHead = res.writeHead.bind(res) as (status: number, ...rest: unknown[]) => ServerResponse;
  const write = res.write.bind(res) as (chunk: unknown, callback?: unknown) => boolean;
  const end = res.end.bind(res) as (chunk?: unknown, callback?: unknown) => ServerResponse;
  const setHeader = res.setHeader.bind(res);
  const seal = (chunk: unknown, encoding: unknown): Buffer =>
    exchange.sealer.seal(chunk as Uint8Array | string, typeof encoding === 'string' ? (encoding as BufferEncoding) : undefined);

  res.setHeader = (name: string, value: number | string | readonly string[]) => (name.toLowerCase() === 'content-length' ? res : setHeader(name, value));
  res.writeHead = ((status: number, ...rest: unknown[]) => {
    const headers = rest.find((r) => typeof r === 'object') as Headers;
    const reason = rest.find((r) => typeof r === 'string');
    res.removeHeader('content-length');
    return reason === undefined ? writeHead(status, withoutLength(headers)) : writeHead(status, reason, withoutLength(headers));
  }) as ServerResponse['writeHead'];
  // Called once per chunk (every SSE event): plain parameters, no rest arrays.
  res.write = ((chunk: unknown, encoding?: unknown, callback?: unknown) => {
    const done = typeof encoding === 'function' ? encoding : callback;
    if (chunk === undefined || chunk === null || (chunk as { length: number }).length === 0) return write(EMPTY, done);
    return write(seal(chunk, encoding), done);
  }) as ServerResponse['write'];
  res.end = ((chunk?: unknown, encoding?: unknown, callback?: unknown) => {
    if (typeof chunk === 'function') return end(chunk);
    const done = typeof encoding === 'function' ? encoding : callback;
    if (chunk === undefined || chunk === null || (chunk as { length: number }).length === 0) return end(done);
    return end(seal(chunk, encoding), done);
  }) as ServerResponse['end'];
}
