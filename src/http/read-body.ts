import type { IncomingMessage } from 'node:http';
import { HttpError, httpError } from '../protocol/errors.ts';
import { budgetExhausted, type BudgetHold } from '../limits/memory-budget.ts';

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
 * Every byte is charged to `hold` as it arrives (a declared length up front): past the memory budget
 * the read stops with a 503, so slow or large bodies together cannot outgrow the process.
 */
export async function readBody(req: IncomingMessage, limit: number, timeoutMs: number, hold?: BudgetHold): Promise<Buffer> {
  const opener = openers.get(req);
  if (opener === undefined) return readRawBody(req, limit, timeoutMs, hold);
  const plain = await opener.open(await readRawBody(req, opener.maxSealedBytes, timeoutMs, hold));
  if (hold !== undefined && !(await hold.grow(plain.length))) throw overBudget();
  return plain;
}

const overBudget = () => {
  const error = budgetExhausted();
  return new HttpError(error.code, error.message, { headers: { ...error.headers, connection: 'close' } });
};

async function readRawBody(req: IncomingMessage, limit: number, timeoutMs: number, hold: BudgetHold | undefined): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    throw httpError('request_too_large', `The request body is larger than ${limit} bytes.`);
  }
  // A declared length is charged whole before the first byte: a thousand slow senders are refused at once, not as their bytes trickle in.
  const prepaid = declared === undefined ? 0 : Number(declared);
  if (hold !== undefined && prepaid > 0 && !(await hold.grow(prepaid))) throw overBudget();
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
      if (hold === undefined || size <= prepaid) return;
      const charged = hold.grow(size - Math.max(prepaid, size - chunk.length));
      if (charged === true) return;
      if (charged === false) return refuse();
      // The primary decides (a cluster worker): no more bytes are read until it has.
      req.pause();
      void charged.then((ok) => (ok ? req.resume() : refuse()));
    };
    const refuse = () => {
      cleanup();
      reject(overBudget());
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = () => {
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

/** docs/api.md#errors: chat bodies must be JSON (415 otherwise). */
export function requireJson(req: IncomingMessage): void {
  const type = req.headers['content-type'];
  const essence = type?.split(';', 1)[0]!.trim().toLowerCase();
  if (essence !== 'application/json') {
    throw httpError('unsupported_media_type', "The request body must be JSON, sent with 'Content-Type: application/json'.");
  }
}
