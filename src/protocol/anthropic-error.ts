import type { HttpError } from './errors.ts';

/**
 * Errors on Anthropic's Messages API path (docs/api.md#anthropic-messages) in that API's own shape,
 * `{"type":"error","error":{"type":...,"message":...}}`: the status and message are the catalogue's
 * (src/protocol/errors.ts), the `type` the one Anthropic gives that status, and Sigil's stable code rides
 * along as `error.code`, which Anthropic clients ignore.
 */
const TYPES_BY_STATUS: ReadonlyMap<number, string> = new Map([
  [401, 'authentication_error'],
  [402, 'billing_error'],
  [403, 'permission_error'],
  [404, 'not_found_error'],
  [413, 'request_too_large'],
  [429, 'rate_limit_error'],
  [503, 'overloaded_error'],
  [504, 'timeout_error'],
  [529, 'overloaded_error'],
]);

/** The Messages API's error `type` for a status: 4xx not listed are `invalid_request_error`, 5xx not listed `api_error`. */
export function anthropicErrorType(status: number): string {
  return TYPES_BY_STATUS.get(status) ?? (status < 500 ? 'invalid_request_error' : 'api_error');
}

export interface AnthropicErrorBody {
  type: 'error';
  error: { type: string; message: string; code: string };
  request_id?: string;
}

export function anthropicErrorBody(err: HttpError, requestId?: string): AnthropicErrorBody {
  const body: AnthropicErrorBody = { type: 'error', error: { type: anthropicErrorType(err.status), message: err.message, code: err.code } };
  if (requestId !== undefined) body.request_id = requestId;
  return body;
}

/** One `error` event, as the Messages API ends a stream that fails after it started. */
export function anthropicSseErrorEvent(err: HttpError): string {
  return `event: error\ndata: ${JSON.stringify(anthropicErrorBody(err))}\n\n`;
}
