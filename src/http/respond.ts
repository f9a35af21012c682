import type { ServerResponse } from 'node:http';
import { anthropicErrorBody } from '../protocol/anthropic-error.ts';
import type { HttpError } from '../protocol/errors.ts';

export function sendJson(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}, contentType = 'application/json'): void {
  res.writeHead(status, { ...headers, 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** Sends the error in OpenAI's shape; once headers are out, the only honest signal left is a cut. */
export function sendError(res: ServerResponse, err: HttpError, extraHeaders?: Record<string, string>): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(
    res,
    err.status,
    JSON.stringify(err.toJSON()),
    { ...extraHeaders, ...err.headers },
    err.problemType === undefined ? 'application/json' : 'application/problem+json',
  );
}

/** Sends the error in the Messages API's shape (docs/api.md#anthropic-messages), for a request on that path. */
export function sendAnthropicError(res: ServerResponse, err: HttpError, requestId: string, extraHeaders?: Record<string, string>): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, err.status, JSON.stringify(anthropicErrorBody(err, requestId)), { ...extraHeaders, ...err.headers });
}
