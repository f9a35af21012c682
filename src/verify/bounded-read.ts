import { SigilError } from '../protocol/sigil-error.ts';

/**
 * Reads a body from the network up to a byte cap and before a deadline, so that a service (or anything between it
 * and us) can cost neither unbounded memory nor unbounded time. Used for every read the verifier, connect and the
 * attested client make (docs/verify.md, "What a verifier reads, and for how long").
 */

export type BoundedReadErrorCode = 'ERR_READ_TOO_LARGE' | 'ERR_READ_DEADLINE';

/** A read stopped at a bound: `limit` says which one, `what` names the thing read, in words ("the attestation document"). */
export class BoundedReadError extends SigilError<BoundedReadErrorCode> {
  readonly limit: 'bytes' | 'deadline';
  readonly what: string;

  constructor(code: BoundedReadErrorCode, what: string, message: string) {
    super(code, message);
    this.limit = code === 'ERR_READ_TOO_LARGE' ? 'bytes' : 'deadline';
    this.what = what;
  }
}

export function isBoundedReadError(err: unknown): err is BoundedReadError {
  return err instanceof BoundedReadError;
}

/** A deadline shared by every step of one fetch (connecting, headers, body): its signal aborts what is in flight. */
export interface ReadDeadline {
  signal: AbortSignal;
  /** The deadline as the error states it. */
  milliseconds: number;
}

/** A deadline that starts counting now. */
export function readDeadline(milliseconds: number): ReadDeadline {
  return { signal: AbortSignal.timeout(milliseconds), milliseconds };
}

export interface ReadBounds {
  /** The thing read, in words, for the error: "the attestation document", "log tile tile/0/000". */
  what: string;
  /** The largest body accepted, in bytes; one byte more fails without holding the rest. */
  maxBytes: number;
  /** When given, the read fails once it passes. */
  deadline?: ReadDeadline;
}

/** 4 MiB, 64 MiB, 1.5 KiB, 12 bytes: a cap in the unit a reader takes in at a glance. */
export function describeBytes(bytes: number): string {
  const units: Array<[number, string]> = [
    [1024 * 1024 * 1024, 'GiB'],
    [1024 * 1024, 'MiB'],
    [1024, 'KiB'],
  ];
  for (const [size, unit] of units) {
    if (bytes >= size) return `${Number((bytes / size).toFixed(1))} ${unit}`;
  }
  return `${bytes} bytes`;
}

function describeSeconds(milliseconds: number): string {
  return milliseconds % 1000 === 0 ? `${milliseconds / 1000} s` : `${(milliseconds / 1000).toFixed(1)} s`;
}

export function tooLargeError(bounds: ReadBounds): BoundedReadError {
  return new BoundedReadError('ERR_READ_TOO_LARGE', bounds.what, `${bounds.what} is larger than ${describeBytes(bounds.maxBytes)}, the most accepted`);
}

export function deadlineError(what: string, deadline: ReadDeadline): BoundedReadError {
  return new BoundedReadError('ERR_READ_DEADLINE', what, `${what} did not arrive within ${describeSeconds(deadline.milliseconds)}, the deadline for it`);
}

/** Rejects when `deadline` passes; never settles otherwise. `release` removes the listener. */
function whenPassed(what: string, deadline: ReadDeadline | undefined): { passed: Promise<never>; release: () => void } {
  if (deadline === undefined) return { passed: new Promise<never>(() => undefined), release: () => undefined };
  let release = (): void => undefined;
  const passed = new Promise<never>((_, reject) => {
    if (deadline.signal.aborted) {
      reject(deadlineError(what, deadline));
      return;
    }
    const onAbort = (): void => reject(deadlineError(what, deadline));
    deadline.signal.addEventListener('abort', onAbort, { once: true });
    release = () => deadline.signal.removeEventListener('abort', onAbort);
  });
  passed.catch(() => undefined);
  return { passed, release };
}

/** A web ReadableStream (fetch's body) or a Node stream / async iterable (undici.request's body, a file). */
export type ReadableBody = ReadableStream<Uint8Array> | AsyncIterable<Uint8Array | string>;

function stop(body: ReadableBody, iterator: AsyncIterator<Uint8Array | string>): void {
  const destroy = (body as { destroy?: (err?: Error) => void }).destroy;
  if (typeof destroy === 'function') destroy.call(body);
  void iterator.return?.().catch(() => undefined);
}

/**
 * The whole body, read chunk by chunk: refused as soon as it passes `maxBytes` (never held past it) or once the
 * deadline passes (even when no byte arrives at all). The source is cancelled either way.
 */
export async function readBounded(body: ReadableBody | null | undefined, bounds: ReadBounds): Promise<Buffer> {
  const { passed, release } = whenPassed(bounds.what, bounds.deadline);
  if (body === null || body === undefined) {
    release();
    if (bounds.deadline?.signal.aborted === true) throw deadlineError(bounds.what, bounds.deadline);
    return Buffer.alloc(0);
  }
  const iterator = (body as AsyncIterable<Uint8Array | string>)[Symbol.asyncIterator]();
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for (;;) {
      const next = await Promise.race([iterator.next(), passed]);
      if (next.done === true) break;
      const chunk = typeof next.value === 'string' ? Buffer.from(next.value) : Buffer.from(next.value.buffer, next.value.byteOffset, next.value.byteLength);
      total += chunk.byteLength;
      if (total > bounds.maxBytes) throw tooLargeError(bounds);
      chunks.push(chunk);
    }
  } catch (err) {
    stop(body, iterator);
    if (bounds.deadline?.signal.aborted === true && !(err instanceof BoundedReadError)) throw deadlineError(bounds.what, bounds.deadline);
    throw err;
  } finally {
    release();
  }
  return Buffer.concat(chunks, total);
}

/** A fetch Response's body under `bounds`; a Content-Length above the cap is refused before any byte is read. */
export async function readResponseBounded(response: Response, bounds: ReadBounds): Promise<Buffer> {
  const declared = Number(response.headers.get('content-length') ?? '0');
  if (declared > bounds.maxBytes) {
    await response.body?.cancel().catch(() => undefined);
    throw tooLargeError(bounds);
  }
  return readBounded(response.body, bounds);
}

/**
 * Waits for `promise` (a connection, the headers of an answer) no longer than `deadline`; the caller passes the same
 * deadline's signal to whatever it started, so the work in flight is aborted too.
 */
export async function beforeDeadline<T>(what: string, deadline: ReadDeadline, promise: Promise<T>): Promise<T> {
  const { passed, release } = whenPassed(what, deadline);
  try {
    return await Promise.race([promise, passed]);
  } catch (err) {
    if (deadline.signal.aborted && !(err instanceof BoundedReadError)) throw deadlineError(what, deadline);
    throw err;
  } finally {
    release();
  }
}
