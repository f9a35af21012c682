import type { TokenUsage } from '../proxy/sse-relay.ts';

/** The one log line each request leaves: ids, route, outcome and counts; never content, never keys. */
export interface AccessLogLine {
  request_id: string;
  method: string;
  route: string;
  /** Only for a path no route matched (a 404): its shape, see unmatchedPathShape. */
  path?: string;
  status?: number;
  model?: string;
  /** The API key's id (the first 12 hex digits of its SHA-256, as `sigil keys list` shows it), never the key. */
  key_id?: string;
  /** The upstream that answered, or the last one tried when none could be reached. */
  upstream?: string;
  /** The transport error's code (ECONNREFUSED, UND_ERR_CONNECT_TIMEOUT, ...) when the engine could not be asked: never content. */
  upstream_errno?: string;
  stream?: boolean;
  receipt?: boolean;
  usage?: TokenUsage;
  error_code?: string;
  /** Seconds from the request to the first stream chunk written (not logged: a metric). */
  ttft_s?: number;
}

/** A client's X-Request-Id is kept when it is 1-128 of these characters: an id, never room for content. */
const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The client's X-Request-Id when it is a plain id, else undefined (Sigil makes one). */
export function clientRequestId(value: string | string[] | undefined): string | undefined {
  return typeof value === 'string' && CLIENT_REQUEST_ID.test(value) ? value : undefined;
}

/** The words of Sigil's own paths (and what browsers and crawlers ask for): the only path segments a log line shows. */
const KNOWN_SEGMENTS = new Set([
  'v1',
  'chat',
  'completions',
  'embeddings',
  'responses',
  'models',
  'receipts',
  'verify',
  'jwks.json',
  'policy',
  'attestation',
  'healthz',
  'readyz',
  'metrics',
  '.well-known',
  'hpke-keys',
  'trust',
  'app.js',
  'styles.css',
  'index.html',
  'favicon.ico',
  'robots.txt',
]);

/**
 * What a 404's log line shows of the path: Sigil's own words as they are, any other segment as `*`
 * (`/v1/chat/completion` is logged `/v1/chat/*`). A path is typed by the client and may carry
 * anything; the shape tells the operator which part of the API was missed without logging it.
 */
export function unmatchedPathShape(pathname: string): string {
  const segments = pathname.split('/').slice(1, 17);
  return '/' + segments.map((s) => (s === '' || KNOWN_SEGMENTS.has(s) ? s : '*')).join('/');
}
