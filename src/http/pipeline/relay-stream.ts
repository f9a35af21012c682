import { teeSseStream } from '../../proxy/sse-relay.ts';
import type { ForwardedExchange } from './exchange.ts';
import { messageReceipt, modelReceipt } from './sign.ts';
import { receiptTrailer } from '../../protocol/sealed-receipt.ts';
import { anthropicSseErrorEvent } from '../../protocol/anthropic-error.ts';
import { cameThroughGateway } from '../oblivious-requests.ts';

/** Whether the engine answered with a stream (relayed event by event) rather than one JSON document. */
export function streams(x: ForwardedExchange): boolean {
  return String(x.engine.headers['content-type'] ?? '').startsWith('text/event-stream');
}

/**
 * Relay, a stream: the engine's events as they come, unbuffered and byte for byte (the model name put
 * back to the catalogue's), the model receipt in the headers and the message receipt as the stream's
 * last comment when receipts were asked for (docs/receipts.md#the-two-receipts-and-where-they-travel);
 * sealed, only the message receipt and its leaf index, inside the sealed body.
 */
export async function relayStream(x: ForwardedExchange): Promise<void> {
  const { res, ctx, engine } = x;
  const headers: Record<string, string> = {
    'content-type': String(engine.headers['content-type']),
    'cache-control': 'no-cache',
    'x-accel-buffering': 'no',
  };
  if (x.receipt.wanted && !x.sealed) {
    headers[ctx.headers.receipt] = await modelReceipt(x);
    headers[ctx.headers.receiptId] = x.receiptId;
    if (x.logIndex !== undefined) headers[ctx.headers.logIndex] = String(x.logIndex);
  }
  res.writeHead(200, headers);
  // With the engine's first chunk already here, the headers leave with it (one write instead of two);
  // otherwise they leave now, so the client sees the stream start as soon as the engine's did.
  if (engine.body.readableLength === 0) res.flushHeaders();
  x.log.status = 200;

  ctx.metrics.activeStreams.inc();
  const relay = teeSseStream({
    source: engine.body,
    sink: res,
    rewriteModel: x.rewriteModel,
    forReceipt: x.receipt.wanted,
    maxEventBytes: ctx.config.limits.max_sse_event_bytes,
    completion: x.endpoint.completion,
    ...(x.endpoint.completingEvent === undefined ? {} : { completingEvent: x.endpoint.completingEvent }),
    ...(x.endpoint.errors === 'anthropic' ? { errorEvent: anthropicSseErrorEvent } : {}),
    readUsage: x.endpoint.readUsage,
    cut: x.streamsCut,
    maxStreamMs: ctx.config.limits.max_stream_seconds * 1000,
    maxStreamBytes: ctx.config.limits.max_stream_bytes,
    // Sealed (EHBP or Oblivious HTTP), each write is padded so its frame hides the tokens' length (docs/ehbp.md, "Padding").
    ...((x.sealed || cameThroughGateway(x.req)) && ctx.config.ehbp.stream_padding_bytes > 0 ? { padTo: ctx.config.ehbp.stream_padding_bytes } : {}),
  });
  // Attached after the relay's own listener, so it fires once the first chunk has been written.
  engine.body.once('data', () => (x.log.ttft_s = (performance.now() - x.started) / 1000));
  const result = await relay.finally(() => ctx.metrics.activeStreams.dec());
  if (result.droppedReceiptComments > 0) ctx.metrics.engineReceiptComments.inc(result.droppedReceiptComments);
  if (result.usage) x.log.usage = result.usage;
  if (result.error) x.log.error_code = result.error.code;
  if (result.clientGone) x.log.error_code = 'client_closed';
  if (!result.complete) return;
  if (x.receipt.wanted) {
    const jws = await messageReceipt(x, result.completionId ?? '', result.responseHash!);
    // Sealed, the leaf index travels in the receipt comment (docs/log.md); in the clear the comment is the receipt alone.
    res.end(receiptTrailer(jws, x.sealed ? x.logIndex : undefined));
  } else {
    res.end();
  }
}
