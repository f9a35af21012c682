import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AppContext } from '../context.ts';
import type { RequestTarget } from '../request-target.ts';
import { httpError } from '../../protocol/errors.ts';
import { sendJson } from '../respond.ts';

/** GET /v1/receipts/{id}: only the key that made the request may fetch its receipt. */
export async function handleGetReceipt(req: IncomingMessage, res: ServerResponse, ctx: AppContext, url: RequestTarget): Promise<void> {
  const caller = ctx.keyRing.authenticate(req.headers);
  const id = url.pathname.slice('/v1/receipts/'.length);
  const jws = id === '' || id.length > 128 ? undefined : await ctx.receiptStore.get(id, caller);
  if (jws === undefined) throw httpError('receipt_not_found', 'No receipt with that id for this API key (it may have expired).', 'receipt_id');
  sendJson(res, 200, JSON.stringify({ id, receipt: jws }));
}
