import { hash } from 'node:crypto';
import { messageReceiptClaims, modelReceiptClaims } from '../../receipts/claims.ts';
import type { ValidExchange } from './exchange.ts';

/** A digest as receipts write it. */
export const sha256 = (bytes: Buffer): string => 'sha256:' + hash('sha256', bytes);

/**
 * Sign, the model receipt: signed once per exchange, before generation when a stream was asked for
 * (docs/receipts.md#the-two-receipts-and-where-they-travel), else only if the engine streams anyway.
 */
export function modelReceipt(x: ValidExchange): Promise<string> {
  if (x.modelReceipt !== undefined) return x.modelReceipt;
  const log = x.ctx.transparencyLog;
  const signed = x.ctx.signReceipt(
    modelReceiptClaims(x.ctx.receiptContext, { receiptId: x.receiptId, endpoint: x.endpoint.path, model: x.selected, nonce: x.receipt.nonce, now: new Date() }),
  );
  const jws =
    log === undefined
      ? signed
      : signed.then(async (receipt) => {
          x.logIndex = await log.append(receipt, x.receiptId);
          return receipt;
        });
  // Signed while the engine starts: a failure surfaces where it is awaited, and is not left unhandled when the engine fails first.
  jws.catch(() => undefined);
  return (x.modelReceipt = jws);
}

/** Whether the model receipt is signed before the engine is asked: a clear stream with receipts (sealed, no clear header may carry it). */
export function modelReceiptFirst(x: ValidExchange): boolean {
  return x.receipt.wanted && x.chat.stream && !x.sealed;
}

/**
 * Sign, the message receipt: over the request as the client sent it, as the engine got it (when they
 * differ) and the response as the client got it (docs/receipts.md#what-each-hash-covers); stored for
 * GET /v1/receipts/{id} before it is sent, and appended to the transparency log when there is one (docs/log.md).
 */
export async function messageReceipt(x: ValidExchange, completionId: string, responseHash: string): Promise<string> {
  const jws = await x.ctx.signReceipt(
    messageReceiptClaims(x.ctx.receiptContext, {
      receiptId: x.receiptId,
      endpoint: x.endpoint.path,
      model: x.selected,
      nonce: x.receipt.nonce,
      now: new Date(),
      completionId,
      requestHash: sha256(x.raw),
      ...(x.forwarded === x.raw ? {} : { forwardedRequestHash: sha256(x.forwarded) }),
      responseHash,
    }),
  );
  // Both leave in the same turn: in a worker, one IPC message carries the append and the store's put, and one round trip answers both.
  const [index] = await Promise.all([x.ctx.transparencyLog?.append(jws, x.receiptId), x.ctx.receiptStore.put(x.receiptId, x.caller, jws)]);
  if (index !== undefined) x.logIndex = index;
  return jws;
}
