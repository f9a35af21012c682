import type { ServerResponse } from 'node:http';

/**
 * Every error a client can see, in one place (SPEC 6). Each entry fixes the HTTP status and the
 * OpenAI `type`; the `code` is the entry's key. Messages are written at the throw site.
 */
const CATALOGUE = {
  invalid_json: { status: 400, type: 'invalid_request_error' },
  invalid_value: { status: 400, type: 'invalid_request_error' },
  missing_required_parameter: { status: 400, type: 'invalid_request_error' },
  invalid_nonce: { status: 400, type: 'invalid_request_error' },
  region_unavailable: { status: 400, type: 'invalid_request_error' },
  upstream_bad_request: { status: 400, type: 'invalid_request_error' },
  missing_api_key: { status: 401, type: 'authentication_error' },
  invalid_api_key: { status: 401, type: 'authentication_error' },
  model_not_found: { status: 404, type: 'invalid_request_error' },
  receipt_not_found: { status: 404, type: 'invalid_request_error' },
  not_found: { status: 404, type: 'invalid_request_error' },
  method_not_allowed: { status: 405, type: 'invalid_request_error' },
  request_timeout: { status: 408, type: 'invalid_request_error' },
  request_too_large: { status: 413, type: 'invalid_request_error' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error' },
  rate_limit_exceeded: { status: 429, type: 'rate_limit_exceeded' },
  internal_error: { status: 500, type: 'server_error' },
  upstream_unreachable: { status: 502, type: 'upstream_error' },
  upstream_bad_response: { status: 502, type: 'upstream_error' },
  upstream_server_error: { status: 502, type: 'upstream_error' },
  not_ready: { status: 503, type: 'service_unavailable' },
  upstream_timeout: { status: 504, type: 'upstream_error' },
} as const satisfies Record<string, { status: number; type: string }>;

export type ErrorCode = keyof typeof CATALOGUE;

export class HttpError extends Error {
  readonly status: number;
  readonly type: string;
  /** A catalogue code, or an engine's own code passed through with its 4xx. */
  readonly code: string;
  readonly param: string | null;
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    code: ErrorCode,
    message: string,
    options: { param?: string | null; headers?: Record<string, string>; status?: number; type?: string; engineCode?: string } = {},
  ) {
    super(message);
    const entry = CATALOGUE[code];
    this.code = options.engineCode ?? code;
    this.status = options.status ?? entry.status;
    this.type = options.type ?? entry.type;
    this.param = options.param ?? null;
    this.headers = options.headers ?? {};
  }

  toJSON(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
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

export function sendError(res: ServerResponse, err: HttpError, extraHeaders?: Record<string, string>): void {
  const body = JSON.stringify(err.toJSON());
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(err.status, {
    ...extraHeaders,
    ...err.headers,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

/** One SSE event carrying the error, for a stream that fails after it started (SPEC 6). */
export function sseErrorEvent(err: HttpError): string {
  return `data: ${JSON.stringify(err.toJSON())}\n\n`;
}
