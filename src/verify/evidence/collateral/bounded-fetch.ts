import { CollateralAnswerError, CollateralFetchError } from './fetch-error.ts';

/**
 * What a collateral fetch allows a service (or a hostile mirror) to cost: bytes per file and time for the whole
 * fetch. Redirects are followed only to the same origin (scheme, host and port), at most MAX_REDIRECTS times.
 */
export interface FetchLimits {
  /** The largest file accepted, in bytes; a larger answer is refused as soon as it passes the cap. */
  maxFileBytes: number;
  /** The deadline for the whole fetch, in seconds (named in the error). */
  deadlineSeconds: number;
  /** Aborts whatever is still in flight when the deadline passes. */
  signal: AbortSignal;
}

/** Intel's, AMD's and NVIDIA's largest files (CRLs, RIMs) are well under 1 MiB; 16 MiB leaves room for growth. */
export const DEFAULT_MAX_FILE_BYTES = 16 * 1024 * 1024;
export const DEFAULT_DEADLINE_SECONDS = 120;
const MAX_REDIRECTS = 5;

/** Limits that start counting now. */
export function fetchLimits(maxFileBytes = DEFAULT_MAX_FILE_BYTES, deadlineSeconds = DEFAULT_DEADLINE_SECONDS): FetchLimits {
  return { maxFileBytes, deadlineSeconds, signal: AbortSignal.timeout(deadlineSeconds * 1000) };
}

export interface BoundedResponse {
  status: number;
  headers: Headers;
  body: Uint8Array;
}

/** Why a request got no answer, keeping the system's cause (ENOTFOUND, ECONNREFUSED, a certificate error). */
function unreachable(what: string, url: string, err: unknown, limits: FetchLimits): CollateralFetchError {
  if (limits.signal.aborted) return new CollateralFetchError(`${what}: ${url} gave no complete answer within the deadline of ${limits.deadlineSeconds} s`);
  const cause = (err as { cause?: { message?: unknown } }).cause;
  const reason = typeof cause?.message === 'string' ? cause.message : (err as Error).message;
  return new CollateralFetchError(`${what}: ${url} could not be reached (${reason})`);
}

/** The body, read chunk by chunk and refused as soon as it passes the cap, so a huge answer is never held. */
async function readCapped(what: string, url: string, response: Response, limits: FetchLimits): Promise<Uint8Array> {
  const tooLarge = () =>
    new CollateralAnswerError(`${what}: ${url} answered more than ${limits.maxFileBytes} bytes, the cap for one file: it is not the file asked for`);
  const declared = Number(response.headers.get('content-length') ?? '0');
  if (declared > limits.maxFileBytes) {
    await response.body?.cancel();
    throw tooLarge();
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = response.body?.getReader();
  if (reader === undefined) return new Uint8Array(0);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limits.maxFileBytes) {
      await reader.cancel();
      throw tooLarge();
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, total);
}

/**
 * One request under `limits`: redirects only to the same origin, the body capped, the fetch's deadline applied to
 * connecting and reading alike. A non-2xx answer throws CollateralFetchError naming the status; `what` names the file.
 */
export async function boundedFetch(what: string, url: string, init: RequestInit, limits: FetchLimits, doFetch: typeof fetch = fetch): Promise<BoundedResponse> {
  const origin = new URL(url).origin;
  let current = url;
  try {
    for (let hop = 0; ; hop++) {
      const response = await doFetch(current, { ...init, redirect: 'manual', signal: limits.signal });
      const location = response.headers.get('location');
      if (response.status >= 300 && response.status < 400 && location !== null) {
        await response.body?.cancel();
        const next = new URL(location, current);
        if (next.origin !== origin)
          throw new CollateralAnswerError(`${what}: ${url} redirected to ${next.origin}, another server: collateral is taken only from the server named`);
        if (hop === MAX_REDIRECTS) throw new CollateralAnswerError(`${what}: ${url} redirected more than ${MAX_REDIRECTS} times`);
        current = next.href;
        continue;
      }
      if (!response.ok) {
        await response.body?.cancel();
        throw new CollateralFetchError(`${what}: ${url} answered HTTP ${response.status}`);
      }
      return { status: response.status, headers: response.headers, body: await readCapped(what, url, response, limits) };
    }
  } catch (err) {
    if (err instanceof CollateralAnswerError || err instanceof CollateralFetchError) throw err;
    throw unreachable(what, url, err, limits);
  }
}
