import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BrandHeaders } from '../context.ts';
import { ENCAPSULATED_KEY_HEADER, RESPONSE_NONCE_HEADER } from '../../ehbp/suite.ts';

/**
 * CORS is off unless origins are configured. When on, an allowed origin gets its own origin back (never
 * a blanket `*` with credentials), may send a sealed (EHBP) request, and may read the receipt headers.
 */
export interface Cors {
  /** Sets the response headers for an allowed origin; true when the request is a preflight it answered. */
  apply(req: IncomingMessage, res: ServerResponse, allowedMethods: string): boolean;
}

/**
 * What a browser app's official clients send besides the key and body: an Anthropic client's key and version
 * headers (docs/api.md), and the platform, retry and helper headers @anthropic-ai/sdk and openai add to every
 * request. A header left out here makes the browser refuse the request before it is sent.
 */
const CLIENT_SDK_HEADERS = [
  'x-api-key',
  'anthropic-version',
  'anthropic-beta',
  'anthropic-dangerous-direct-browser-access',
  'x-stainless-arch',
  'x-stainless-lang',
  'x-stainless-os',
  'x-stainless-package-version',
  'x-stainless-runtime',
  'x-stainless-runtime-version',
  'x-stainless-retry-count',
  'x-stainless-timeout',
  'x-stainless-helper',
  'x-stainless-helper-method',
];

export function createCors(allowedOrigins: readonly string[], brand: BrandHeaders): Cors | undefined {
  if (allowedOrigins.length === 0) return undefined;
  const any = allowedOrigins.includes('*');
  const origins = new Set(allowedOrigins);
  const exposed = [
    brand.receipt,
    brand.receiptId,
    brand.logIndex,
    // Without it a page cannot tell a sealed answer from a clear one, nor open it.
    RESPONSE_NONCE_HEADER,
    'x-request-id',
    // The Messages API's name for it, which Anthropic's SDKs read.
    'request-id',
    'x-ratelimit-limit',
    'x-ratelimit-remaining',
    'x-ratelimit-reset',
    'retry-after',
  ].join(', ');
  const allowedHeaders = ['authorization', 'content-type', brand.receipt, brand.nonce, ENCAPSULATED_KEY_HEADER, ...CLIENT_SDK_HEADERS].join(', ');
  return {
    apply(req, res, allowedMethods) {
      const origin = req.headers.origin;
      if (origin === undefined || (!any && !origins.has(origin))) return false;
      res.setHeader('access-control-allow-origin', origin);
      res.setHeader('vary', 'Origin');
      res.setHeader('access-control-expose-headers', exposed);
      if (req.method !== 'OPTIONS' || req.headers['access-control-request-method'] === undefined) return false;
      res.writeHead(204, {
        'access-control-allow-methods': allowedMethods,
        'access-control-allow-headers': allowedHeaders,
        'access-control-max-age': '600',
      });
      res.end();
      return true;
    },
  };
}

/**
 * CORS, a step of every routed request: public documents (docs/trust-page.md) any page may read, with `*` and
 * never credentials; the configured origins their own origin back. True when the request was a preflight,
 * answered here (204): nothing else runs.
 */
export function applyCors(req: IncomingMessage, res: ServerResponse, cors: Cors | undefined, publicDocument: boolean, allowedMethods: string): boolean {
  if (publicDocument) res.setHeader('access-control-allow-origin', '*');
  return cors !== undefined && cors.apply(req, res, allowedMethods);
}
