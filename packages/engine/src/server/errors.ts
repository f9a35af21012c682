/** Every error the engine's HTTP API can answer, OpenAI-shaped: `{"error":{"message","type","param","code"}}`. */
export class EngineHttpError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    readonly code: string | null,
    message: string,
    readonly param: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }

  toJSON(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

export const invalidRequest = (message: string, param: string | null = null): EngineHttpError =>
  new EngineHttpError(400, 'invalid_request_error', 'invalid_request', message, param);

export const invalidJson = (): EngineHttpError => new EngineHttpError(400, 'invalid_request_error', 'invalid_json', 'The request body is not valid JSON.');

export const contextLengthExceeded = (message: string): EngineHttpError =>
  new EngineHttpError(400, 'invalid_request_error', 'context_length_exceeded', message, 'messages');

export const notFound = (path: string): EngineHttpError => new EngineHttpError(404, 'invalid_request_error', 'not_found', `No route for ${path}.`);

export const methodNotAllowed = (method: string, path: string, allow: string): EngineHttpError =>
  new EngineHttpError(405, 'invalid_request_error', 'method_not_allowed', `${method} is not allowed on ${path}.`, null, { allow });

export const bodyTooLarge = (limit: number): EngineHttpError =>
  new EngineHttpError(413, 'invalid_request_error', 'body_too_large', `The request body is larger than ${limit} bytes.`);

export const queueFull = (): EngineHttpError =>
  new EngineHttpError(429, 'requests', 'rate_limit_exceeded', 'The engine is busy and its queue is full; retry shortly.', null, {
    'retry-after': '1',
  });

export const internalError = (): EngineHttpError => new EngineHttpError(500, 'server_error', 'internal_error', 'The engine failed to generate a completion.');
