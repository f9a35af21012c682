import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Caller } from '../../auth/bearer.ts';
import type { Budget } from '../../limits/memory-budget.ts';
import { EngineAbort } from '../../proxy/engine-request.ts';
import { readReceiptRequest } from '../../receipts/request.ts';
import type { AppContext } from '../context.ts';
import type { EndpointDescription } from '../endpoints.ts';
import type { AccessLogLine } from '../access-log.ts';
import type { Exchange } from './exchange.ts';

/** What every exchange on this server shares: the memory budget, and the signal that cuts streams when the shutdown grace ends. */
export interface ExchangeShared {
  buffers: Budget;
  streamsCut: AbortSignal;
}

/**
 * Begin: the exchange's state, with the receipt headers read (400 on a value that is not true or false, or a
 * bad nonce), a hold on the memory budget, and the exchange's one close listener, attached before any step
 * waits (a client that leaves while a shared counter answers still frees its slot).
 */
export function begin(
  endpoint: EndpointDescription,
  shared: ExchangeShared,
  req: IncomingMessage,
  res: ServerResponse,
  ctx: AppContext,
  log: AccessLogLine,
  caller: Caller,
  started: number,
): Exchange {
  const x: Exchange = {
    endpoint,
    started,
    ctx,
    req,
    res,
    log,
    caller,
    receipt: readReceiptRequest(req.headers, ctx.headers),
    hold: shared.buffers.hold(),
    abort: new EngineAbort(),
    streamsCut: shared.streamsCut,
    closed: false,
    modelReceipt: undefined,
    logIndex: undefined,
    raw: undefined,
    sealed: undefined,
    release: undefined,
    chat: undefined,
    candidates: undefined,
    receiptId: undefined,
    selected: undefined,
    rewriteModel: undefined,
    forwarded: undefined,
    engine: undefined,
  };
  res.once('close', () => end(x));
  return x;
}

/** The response closed: cancel the engine request if it did not finish, release the slots with the tokens the engine reported, free the buffers. */
function end(x: Exchange): void {
  x.closed = true;
  if (!x.res.writableFinished) x.abort.abort();
  const usage = x.log.usage;
  x.release?.(usage ? usage.prompt_tokens + usage.completion_tokens : 0);
  x.hold.release();
}
