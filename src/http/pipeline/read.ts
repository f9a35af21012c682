import { readBody, requireJson } from '../read-body.ts';
import { sealedExchangeOf } from './ehbp.ts';
import type { Exchange, ReadExchange } from './exchange.ts';

/**
 * Read: the JSON body whole (415 for another type, 413 past `limits.max_body_bytes`, 408 past
 * `limits.body_timeout_ms`, 503 past the memory budget), opened when it came sealed. It is read before
 * admission: a slow sender holds its own connection, never a slot another request could use.
 */
export async function read(x: Exchange): Promise<ReadExchange> {
  requireJson(x.req);
  const { limits } = x.ctx.config;
  const raw = await readBody(x.req, limits.max_body_bytes, limits.body_timeout_ms, x.hold);
  const sealed = sealedExchangeOf(x.req);
  // Sealed without a clear nonce: the nonce both ends derive from the HPKE context (docs/ehbp.md#receipts-under-ehbp).
  if (sealed !== undefined && x.receipt.nonce === '') x.receipt.nonce = sealed.receiptNonce;
  return Object.assign(x, { raw, sealed: sealed !== undefined });
}
