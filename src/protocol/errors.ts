/**
 * Every error a client can see, in one place (docs/api.md). The catalogue is closed: each entry fixes
 * the HTTP status and the OpenAI `type`, the `code` is the entry's key, and nothing else can be
 * sent. Messages are written at the throw site. This module is the bottom layer: it imports nothing
 * of Sigil's, so the proxy, the limits, the receipts and the fleet can all throw these.
 */
const CATALOGUE = {
  invalid_json: { status: 400, type: 'invalid_request_error' },
  invalid_value: { status: 400, type: 'invalid_request_error' },
  missing_required_parameter: { status: 400, type: 'invalid_request_error' },
  invalid_nonce: { status: 400, type: 'invalid_request_error' },
  region_unavailable: { status: 400, type: 'invalid_request_error' },
  duplicate_header: { status: 400, type: 'invalid_request_error' },
  duplicate_key: { status: 400, type: 'invalid_request_error' },
  model_not_supported: { status: 400, type: 'invalid_request_error' },
  bad_request: { status: 400, type: 'invalid_request_error' },
  body_read_failed: { status: 400, type: 'invalid_request_error' },
  upstream_bad_request: { status: 400, type: 'invalid_request_error' },
  context_length_exceeded: { status: 400, type: 'invalid_request_error' },
  ehbp_required: { status: 400, type: 'invalid_request_error' },
  ohttp_invalid_request: { status: 400, type: 'invalid_request_error' },
  ohttp_key_config: { status: 400, type: 'invalid_request_error' },
  ehbp_invalid_encapsulated_key: { status: 400, type: 'invalid_request_error' },
  ehbp_invalid_body: { status: 400, type: 'invalid_request_error' },
  missing_api_key: { status: 401, type: 'authentication_error' },
  invalid_api_key: { status: 401, type: 'authentication_error' },
  metrics_loopback_only: { status: 403, type: 'permission_error' },
  cross_origin_refused: { status: 403, type: 'permission_error' },
  model_not_found: { status: 404, type: 'invalid_request_error' },
  receipt_not_found: { status: 404, type: 'invalid_request_error' },
  log_entry_not_found: { status: 404, type: 'invalid_request_error' },
  not_found: { status: 404, type: 'invalid_request_error' },
  upstream_not_found: { status: 404, type: 'invalid_request_error' },
  method_not_allowed: { status: 405, type: 'invalid_request_error' },
  request_timeout: { status: 408, type: 'invalid_request_error' },
  ehbp_replayed: { status: 409, type: 'invalid_request_error' },
  request_too_large: { status: 413, type: 'invalid_request_error' },
  upstream_request_too_large: { status: 413, type: 'invalid_request_error' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error' },
  upstream_unprocessable: { status: 422, type: 'invalid_request_error' },
  ehbp_key_config_mismatch: { status: 422, type: 'invalid_request_error' },
  rate_limit_exceeded: { status: 429, type: 'requests' },
  upstream_rate_limited: { status: 429, type: 'requests' },
  request_header_fields_too_large: { status: 431, type: 'invalid_request_error' },
  internal_error: { status: 500, type: 'server_error' },
  stored_receipt_invalid: { status: 500, type: 'server_error' },
  log_tile_invalid: { status: 500, type: 'server_error' },
  upstream_unreachable: { status: 502, type: 'upstream_error' },
  upstream_bad_response: { status: 502, type: 'upstream_error' },
  upstream_server_error: { status: 502, type: 'upstream_error' },
  // sigil connect (docs/connect.md): what it could not verify never reaches the app as a success.
  attestation_failed: { status: 502, type: 'verification_error' },
  receipt_verification_failed: { status: 502, type: 'verification_error' },
  response_not_sealed: { status: 502, type: 'verification_error' },
  transparency_log_failed: { status: 502, type: 'verification_error' },
  not_ready: { status: 503, type: 'service_unavailable' },
  server_busy: { status: 503, type: 'service_unavailable' },
  ehbp_replay_window_full: { status: 503, type: 'service_unavailable' },
  // The transparency log cannot hold a receipt's entry (a failed write, its folder taken over): no receipt is given (docs/log.md).
  log_unavailable: { status: 503, type: 'service_unavailable' },
  upstream_timeout: { status: 504, type: 'upstream_error' },
} as const satisfies Record<string, { status: number; type: string }>;

export type ErrorCode = keyof typeof CATALOGUE;

/** Every code of the catalogue, in its order (docs/api.md). */
export const HTTP_ERROR_CODES = Object.keys(CATALOGUE) as ErrorCode[];

export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string };
}

export class HttpError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly type: string;
  readonly param: string | null;
  readonly headers: Readonly<Record<string, string>>;

  /** An RFC 9457 problem type the body also carries (EHBP's key-configuration mismatch), sent as application/problem+json. */
  readonly problemType: string | undefined;

  constructor(code: ErrorCode, message: string, options: { param?: string | null; headers?: Record<string, string>; problemType?: string } = {}) {
    super(message);
    this.problemType = options.problemType;
    this.code = code;
    this.status = CATALOGUE[code].status;
    this.type = CATALOGUE[code].type;
    this.param = options.param ?? null;
    this.headers = options.headers ?? {};
  }

  toJSON(): OpenAiErrorBody & { type?: string; title?: string } {
    const body = { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
    // One body both an EHBP client (problem type and title) and an OpenAI client (error object) can read.
    return this.problemType === undefined ? body : { type: this.problemType, title: this.message, ...body };
  }
}

export function httpError(code: ErrorCode, message: string, param?: string | null): HttpError {
  return new HttpError(code, message, { param: param ?? null });
}

/** The error as it reaches the client; anything unexpected becomes a 500 that reveals nothing. */
export function toHttpError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  return new HttpError('internal_error', 'The server had an error while processing your request.');
}

/** One SSE event carrying the error, for a stream that fails after it started (docs/api.md). */
export function sseErrorEvent(err: HttpError): string {
  return `data: ${JSON.stringify(err.toJSON())}\n\n`;
}

/** An engine's 4xx, by status, as the catalogue entry that carries it on; other 4xx become a 400. */
const ENGINE_REFUSALS: ReadonlyMap<number, ErrorCode> = new Map<number, ErrorCode>([
  [400, 'upstream_bad_request'],
  [404, 'upstream_not_found'],
  [413, 'upstream_request_too_large'],
  [422, 'upstream_unprocessable'],
  [429, 'upstream_rate_limited'],
]);

/**
 * docs/api.md and 6: an engine's refusal reaches the client in OpenAI's shape, with the engine's message
 * and param (and its code when it is `context_length_exceeded`). Credentials refused (401, 403) and failures (5xx, or anything not a 4xx) are Sigil's
 * problem, not the client's: 502. An engine 429 keeps its `Retry-After`.
 */
export function engineRefusal(status: number, info: { message?: string; param?: string; code?: string }, retryAfter: string | undefined): HttpError {
  if (status < 400 || status >= 500 || status === 401 || status === 403) {
    return new HttpError('upstream_server_error', `The engine failed with status ${status}.`);
  }
  // OpenAI's (and vLLM's, and the built-in engine's) code for a prompt over the context is one clients test for: it is kept.
  const code = status === 400 && info.code === 'context_length_exceeded' ? 'context_length_exceeded' : (ENGINE_REFUSALS.get(status) ?? 'upstream_bad_request');
  const headers: Record<string, string> = {};
  if (code === 'upstream_rate_limited' && retryAfter !== undefined && /^\d{1,9}$/.test(retryAfter.trim())) headers['retry-after'] = retryAfter.trim();
  return new HttpError(code, info.message ?? `The engine refused the request with status ${status}.`, { param: info.param ?? null, headers });
}
