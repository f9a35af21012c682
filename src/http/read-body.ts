import type { IncomingMessage } from 'node:http';
import { HttpError, httpError } from '../protocol/errors.ts';

/** A request whose body arrives sealed (EHBP): how much ciphertext to accept, and how to open it. */
export interface BodyOpener {
  maxSealedBytes: number;
  open(sealed: Buffer): Promise<Buffer>;
}

const openers = new WeakMap<IncomingMessage, BodyOpener>();

/** Marks `req` as carrying a sealed body: `readBody` then returns the opened plaintext. */
export function sealedBody(req: IncomingMessage, opener: BodyOpener): void {
  openers.set(req, opener);
}

/**
 * Reads the request body, refusing more than `limit` bytes (413) before reading further, and a body
 * that takes longer than `timeoutMs` to arrive (408: a slow client must not hold a slot). A sealed
 * (EHBP) body is read up to its own bound and returned opened; `limit` then applies to the plaintext.
 */
export async function readBody(req: IncomingMessage, limit: number, timeoutMs: number): Promise<Buffer> {
  const opener = openers.get(req);
  if (opener === undefined) return readRawBody(req, limit, timeoutMs);
  return opener.open(await readRawBody(req, opener.maxSealedBytes, timeoutMs));
}

function readRawBody(req: IncomingMessage, limit: number, timeoutMs: number): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    return Promise.reject(httpError('request_too_large', `The request body is larger than ${limit} bytes.`));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        // Not drained: the reply closes the connection (server.ts), so the rest is never read.
        reject(httpError('request_too_large', `The request body is larger than ${limit} bytes.`));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(new HttpError('body_read_failed', 'The connection failed before the request body was complete.'));
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new HttpError('request_timeout', `The request body did not arrive within ${timeoutMs} ms.`, { headers: { connection: 'close' } }));
    }, timeoutMs);
    const cleanup = () => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
}

/** SPEC 6: chat bodies must be JSON (415 otherwise). */
export function requireJson(req: IncomingMessage): void {
  const type = req.headers['content-type'];
  const essence = type?.split(';', 1)[0]!.trim().toLowerCase();
  if (essence !== 'application/json') {
    throw httpError('unsupported_media_type', "The request body must be JSON, sent with 'Content-Type: application/json'.");
  }
}
