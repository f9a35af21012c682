import { HttpError } from '../../protocol/errors.ts';
import { editJsonObject, scanJsonObject } from '../../protocol/json-edit.ts';
import { receiptTrailer } from '../../protocol/sealed-receipt.ts';
import { budgetExhausted } from '../../limits/memory-budget.ts';
import { readEngineBody } from '../../proxy/engine-request.ts';
import { endUnlessStalled } from '../stalled-reader.ts';
import type { ForwardedExchange } from './exchange.ts';
import { messageReceipt, sha256 } from './sign.ts';

/**
 * Reads a non-streamed answer whole, charging it to the memory budget. With a Content-Length, its size is
 * charged before a byte is read (refused at once when it does not fit, so a refused answer costs nothing)
 * and the bytes go into one buffer of that size. Without one, it is charged twice as it arrives (the
 * chunks and the buffer they are joined into both exist for a moment). Once whole, twice more, for the
 * text and the value JSON.parse makes of it.
 */
async function readBufferedAnswer(x: ForwardedExchange): Promise<Buffer> {
  const { engine } = x;
  const limit = x.ctx.config.limits.max_answer_bytes;
  const declared = Number(engine.headers['content-length']);
  if (engine.headers['content-length'] !== undefined && Number.isSafeInteger(declared) && declared >= 0 && declared <= limit) {
    if (!(await x.hold.grow(declared))) {
      engine.body.destroy();
      throw budgetExhausted();
    }
    const bytes = await readEngineBody(engine, limit, declared);
    if (!(await x.hold.grow(2 * bytes.length))) throw budgetExhausted();
    return bytes;
  }
  let received = 0;
  let refuse: (error: HttpError) => void = () => undefined;
  const refused = new Promise<never>((_resolve, reject) => (refuse = reject));
  const stop = () => {
    engine.body.off('data', onData);
    refuse(budgetExhausted());
    engine.body.destroy(new Error('memory budget exhausted'));
  };
  const onData = (chunk: Buffer) => {
    received += chunk.length;
    const charged = x.hold.grow(2 * chunk.length);
    if (charged === true) return;
    if (charged === false) return stop();
    // The primary decides (a cluster worker): no more bytes are read until it has.
    engine.body.pause();
    void charged.then((ok) => (ok ? engine.body.resume() : stop()));
  };
  engine.body.on('data', onData);
  try {
    const bytes = await Promise.race([readEngineBody(engine, limit), refused]);
    if (!(await x.hold.grow(2 * received))) throw budgetExhausted();
    return bytes;
  } finally {
    engine.body.off('data', onData);
  }
}

/** The engine's answer as a JSON object, or the 502 that says it is not one. */
function engineObject(bytes: Buffer): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch {
    parsed = undefined;
  }
  if (parsed === undefined || parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new HttpError('upstream_bad_response', 'The engine sent a response that is not valid JSON.');
  return parsed as Record<string, unknown>;
}

/**
 * Relay, one JSON answer: read whole (within `limits.max_answer_bytes` and the memory budget), the
 * engine's bytes sent as they came but for the model value put back to the catalogue's, the message
 * receipt (and its leaf index) in the headers, or sealed, as the last frame after the engine's bytes (docs/ehbp.md#receipts-under-ehbp).
 */
export async function relayJson(x: ForwardedExchange): Promise<void> {
  const { engine } = x;
  const bytes = await readBufferedAnswer(x);
  const completion = engineObject(bytes);
  let out = bytes;
  if (x.rewriteModel !== undefined && 'model' in completion) {
    const scan = scanJsonObject(bytes);
    if (scan.duplicate !== undefined) throw new HttpError('upstream_bad_response', 'The engine sent a response with a key twice in one object.');
    // Only the model value changes: the engine's other bytes (its numbers above all) reach the client as sent.
    out = editJsonObject(bytes, scan, { set: { model: JSON.stringify(x.rewriteModel) } });
    if (!(await x.hold.grow(out.length))) throw budgetExhausted();
  }
  // Only the request and the bytes to send stay: the chunks, the text and the parsed value are garbage from here.
  x.hold.shrink(x.hold.held - out.length - x.raw.length);
  const usage = x.endpoint.readUsage(completion);
  if (usage !== undefined) x.log.usage = usage;
  const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': out.length };
  let trailer: string | undefined;
  if (x.receipt.wanted) {
    const completionId = typeof completion.id === 'string' ? completion.id : '';
    const jws = await messageReceipt(x, completionId, sha256(out));
    if (x.sealed) {
      trailer = receiptTrailer(jws, x.logIndex);
    } else {
      headers[x.ctx.headers.receipt] = jws;
      headers[x.ctx.headers.receiptId] = x.receiptId;
      if (x.logIndex !== undefined) headers[x.ctx.headers.logIndex] = x.logIndex;
    }
  }
  x.log.status = engine.statusCode;
  x.res.writeHead(engine.statusCode, headers);
  // Sealed, the receipt is the last frame, after the engine's bytes (the client splits them, docs/ehbp.md#receipts-under-ehbp).
  endUnlessStalled(
    x.res,
    out,
    x.ctx.config.limits.client_read_timeout_ms,
    () => {
      x.log.error_code = 'client_read_timeout';
      x.ctx.logger.warn({ request_id: x.log.request_id, bytes: out.length }, 'client stopped reading a buffered answer: connection closed');
    },
    trailer,
  );
}
