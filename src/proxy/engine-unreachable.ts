import { HttpError } from '../protocol/errors.ts';

/** The transport error's code (Node's errno name or undici's), or '' when it has none. */
export function transportCode(err: unknown): string {
  return (err as { code?: string }).code ?? (err as { cause?: { code?: string } }).cause?.code ?? '';
}

const CAUSES: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ENOTFOUND: 'no such host',
  EAI_AGAIN: 'the host name could not be looked up now',
  UND_ERR_CONNECT_TIMEOUT: 'the connection timed out',
  UND_ERR_HEADERS_TIMEOUT: 'it accepted the connection but did not answer in time',
  UND_ERR_SOCKET: 'the connection closed',
};

/** Why an engine could not be asked, in words: its transport error, or the HTTP status it answered. */
export function engineUnreachableCause(err: unknown): string {
  const code = transportCode(err);
  if (code !== '') return CAUSES[code] === undefined ? code : `${CAUSES[code]} (${code})`;
  return (err as Error).message;
}

/** An engine request that failed, with the engine and the transport error's code, for the request log (never any content). */
export class EngineRequestFailure extends HttpError {
  constructor(
    failure: HttpError,
    readonly upstream: string,
    readonly errno: string,
  ) {
    super(failure.code, failure.message, { param: failure.param, headers: { ...failure.headers } });
  }
}
