import { createHash, type Hash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { HttpError, sseErrorEvent } from '../protocol/errors.ts';
import { editJsonObject, scanJsonObject } from '../protocol/json-edit.ts';
import { engineFailure } from './engine-request.ts';
import type { StreamEnding } from '../protocol/stream-ending.ts';

export interface TokenUsage {
  prompt_tokens: number;
  completion_tokens: number;
}

/** How a stream says it is finished: the one rule of src/protocol/stream-ending.ts, which the verifier cuts by. */
export type StreamCompletion = StreamEnding;

export interface SseRelayOptions {
  source: Readable;
  sink: ServerResponse;
  /** When set, every event's `model` value is replaced by this catalogue id (names differ); else bytes pass as they are. */
  rewriteModel: string | undefined;
  /** Hash the bytes sent and capture the completion id, for a message receipt. */
  forReceipt: boolean;
  /** Default `done` (a `data: [DONE]` line). */
  completion?: StreamCompletion;
  /** One event larger than this ends the stream with an error event and cancels the engine request. */
  maxEventBytes: number;
  /** Reads the token counts from an event's JSON (endpoints name them differently). Default: chat's usage. */
  readUsage?: (event: Record<string, unknown>) => TokenUsage | undefined;
  /** Aborted with an HttpError as its reason: the stream ends with that error event (a shutdown's grace is over). */
  cut?: AbortSignal;
}

export interface SseRelayResult {
  /** The engine finished the stream by the completion rule and the client got every byte. */
  complete: boolean;
  /** The client went away before the end. */
  clientGone: boolean;
  /** `sha256:` hex of every byte written, through the completing event (when forReceipt). */
  responseHash?: string;
  completionId?: string;
  usage?: TokenUsage;
  /** `: receipt` comment lines the engine sent, which were not relayed (only Sigil writes receipts). */
  droppedReceiptComments: number;
  /** Why the stream failed, when it did (already sent to the client as an error event). */
  error?: HttpError;
}

const LF = 0x0a;
const CR = 0x0d;
const COLON = 0x3a;
const DATA = Buffer.from('data:');
const RECEIPT_COMMENT = /^: ?receipt(?:[ \t]|$)/;
const DONE_PAYLOAD = '[DONE]';
const ignore = () => undefined;

/** Chat's and completions' usage object. */
export function chatUsage(event: Record<string, unknown>): TokenUsage | undefined {
  const value = event.usage;
  if (value === null || typeof value !== 'object') return undefined;
  const { prompt_tokens, completion_tokens } = value as Record<string, unknown>;
  if (typeof prompt_tokens !== 'number' || typeof completion_tokens !== 'number') return undefined;
  return { prompt_tokens, completion_tokens };
}

/** The payload of a `data:` line (one optional space after the colon, as SSE says), or undefined. */
function dataPayload(line: Buffer): Buffer | undefined {
  if (line.length < 5 || line.compare(DATA, 0, 5, 0, 5) !== 0) return undefined;
  return line.subarray(line[5] === 0x20 ? 6 : 5);
}

/**
 * Relays an engine's SSE stream to the client as it arrives, line by line: each complete line is
 * written as soon as it is read, with backpressure; only the unfinished last line of a chunk waits for
 * its end. Work is linear in the bytes (a pending line is kept as pieces, never re-copied or
 * re-scanned), one event is capped at `maxEventBytes`, engine `: receipt` comments are dropped, the
 * completing line is recognised only whole, and nothing after it is relayed. Optionally hashes what
 * was written and replaces `model` per event, editing that value alone. A stream that fails ends
 * with one error event and no completion.
 */
export function teeSseStream(options: SseRelayOptions): Promise<SseRelayResult> {
  const { source, sink, rewriteModel, forReceipt, maxEventBytes } = options;
  const completion = options.completion ?? 'done';
  const readUsage = options.readUsage ?? chatUsage;
  const hash: Hash | undefined = forReceipt ? createHash('sha256') : undefined;
  const modelJson = rewriteModel === undefined ? undefined : JSON.stringify(rewriteModel);
  /** Pieces of the line not finished yet, and their total length. */
  let pending: Buffer[] = [];
  let pendingLength = 0;
  let eventBytes = 0;
  /** The last chunk ended in CR: an LF at the start of the next one finishes that CRLF. */
  let afterCr = false;
  /**
   * `open` until the completing line (`data: [DONE]`, or the data of the `response.completed` event)
   * is relayed; `closing` until its blank line is; then `closed`, and everything after is dropped.
   */
  let state: 'open' | 'closing' | 'closed' = 'open';
  /** The completing line's terminator, to end its event when the engine does not. */
  let closingEol: Buffer = Buffer.from('\n');
  let lastEventType = '';
  let completionId: string | undefined;
  let usage: TokenUsage | undefined;
  let dropped = 0;

  /** Reads what Sigil needs of one data payload; returns the bytes to send (edited when renaming). */
  const onData = (line: Buffer, payload: Buffer): Buffer => {
    if (payload.length === DONE_PAYLOAD.length && payload.toString('latin1') === DONE_PAYLOAD) {
      if (completion === 'done') state = 'closing';
      return line;
    }
    const wantId = forReceipt && completionId === undefined;
    // Only events that can matter are parsed: the first (its id), those with usage, or all when renaming.
    if (modelJson === undefined && !wantId && !payload.includes('"usage"') && !(completion === 'event' && payload.includes('response.completed'))) return line;
    let event: unknown;
    try {
      event = JSON.parse(payload.toString('utf8'));
    } catch {
      return line;
    }
    if (event === null || typeof event !== 'object' || Array.isArray(event)) return line;
    const record = event as Record<string, unknown>;
    const nested =
      completion === 'event' && typeof record.response === 'object' && record.response !== null ? (record.response as Record<string, unknown>) : undefined;
    const id = typeof record.id === 'string' ? record.id : typeof nested?.id === 'string' ? nested.id : undefined;
    if (completionId === undefined && id !== undefined) completionId = id;
    const u = readUsage(record) ?? (nested === undefined ? undefined : readUsage(nested));
    if (u !== undefined) usage = u;
    if (completion === 'event' && (record.type === 'response.completed' || lastEventType === 'response.completed')) state = 'closing';
    if (modelJson === undefined || !('model' in record)) return line;
    const scan = scanJsonObject(payload);
    if (scan.duplicate !== undefined) return line;
    return Buffer.concat([line.subarray(0, line.length - payload.length), editJsonObject(payload, scan, { set: { model: modelJson } })]);
  };

  return new Promise((resolve) => {
    let settled = false;
    let ended = false;
    const finish = (result: Omit<SseRelayResult, 'droppedReceiptComments'>) => {
      if (settled) return;
      settled = true;
      source.off('data', onChunk);
      source.off('end', onEnd);
      source.off('error', onError);
      sink.off('drain', onDrain);
      sink.off('close', onClose);
      options.cut?.removeEventListener('abort', onCut);
      if (result.clientGone || result.error) {
        // Cancels the engine request; the abort error it raises has nobody left to tell.
        source.on('error', ignore);
        source.destroy();
      }
      const out: SseRelayResult = { ...result, droppedReceiptComments: dropped };
      if (usage) out.usage = usage;
      if (completionId !== undefined) out.completionId = completionId;
      resolve(out);
    };

    const fail = (error: HttpError) => {
      if (!sink.destroyed && !sink.writableEnded) sink.end(sseErrorEvent(error));
      finish({ complete: false, clientGone: false, error });
    };

    const tooLarge = () =>
      fail(new HttpError('upstream_bad_response', `The engine sent a stream event larger than ${maxEventBytes} bytes (limits.max_sse_event_bytes).`));

    /** Handles one complete line with its terminator, adding what to send to `out`; true when its terminator was sent as is. */
    const handleLine = (line: Buffer, eol: Buffer, out: Buffer[]): boolean => {
      if (state === 'closed') return false;
      if (state === 'closing') {
        // The blank line after the completing line; anything else is the engine going on past the end.
        state = 'closed';
        out.push(line.length === 0 ? eol : closingEol);
        return line.length === 0;
      }
      if (line.length === 0) {
        eventBytes = 0;
        out.push(eol);
        return true;
      }
      if (line[0] === COLON && RECEIPT_COMMENT.test(line.toString('latin1', 0, Math.min(line.length, 16)))) {
        dropped++;
        return false;
      }
      const payload = dataPayload(line);
      if (payload !== undefined) {
        out.push(onData(line, payload), eol);
        // onData may have moved the state on (TypeScript cannot see that through the call).
        if ((state as string) === 'closing') closingEol = eol.length === 0 ? Buffer.from('\n\n') : eol;
        return true;
      }
      if (completion === 'event' && line.toString('latin1', 0, 6) === 'event:') lastEventType = line.toString('utf8', line[6] === 0x20 ? 7 : 6).trim();
      out.push(line, eol);
      return true;
    };

    const onChunk = (chunk: Buffer) => {
      const out: Buffer[] = [];
      let start = 0;
      if (afterCr && chunk[0] === LF) {
        // The second half of a CRLF whose CR ended the previous chunk and was sent: the same bytes, no new line.
        out.push(chunk.subarray(0, 1));
        start = 1;
      }
      afterCr = false;
      let nextLf = chunk.indexOf(LF, start);
      let nextCr = chunk.indexOf(CR, start);
      while (!settled && (nextLf !== -1 || nextCr !== -1)) {
        const at = nextCr === -1 ? nextLf : nextLf === -1 ? nextCr : Math.min(nextLf, nextCr);
        const crlf = chunk[at] === CR && chunk[at + 1] === LF;
        const eolEnd = at + (crlf ? 2 : 1);
        const piece = chunk.subarray(start, at);
        const line = pendingLength === 0 ? piece : Buffer.concat([...pending, piece], pendingLength + piece.length);
        pending = [];
        pendingLength = 0;
        eventBytes += line.length + (eolEnd - at);
        if (eventBytes > maxEventBytes) return tooLarge();
        const sentEol = handleLine(line, chunk.subarray(at, eolEnd), out);
        if (sentEol && chunk[at] === CR && !crlf && at === chunk.length - 1) afterCr = true;
        start = eolEnd;
        if (nextLf !== -1 && nextLf < start) nextLf = chunk.indexOf(LF, start);
        if (nextCr !== -1 && nextCr < start) nextCr = chunk.indexOf(CR, start);
      }
      if (settled) return;
      if (start < chunk.length) {
        pending.push(chunk.subarray(start));
        pendingLength += chunk.length - start;
        if (eventBytes + pendingLength > maxEventBytes) return tooLarge();
      }
      if (out.length === 0) return;
      const bytes = out.length === 1 ? out[0]! : Buffer.concat(out);
      if (bytes.length === 0) return;
      hash?.update(bytes);
      if (!sink.write(bytes)) source.pause();
    };

    const onEnd = () => {
      ended = true;
      const out: Buffer[] = [];
      if (pendingLength > 0) {
        // A last line without its terminator: relayed as sent.
        const line = Buffer.concat(pending, pendingLength);
        pending = [];
        pendingLength = 0;
        handleLine(line, Buffer.alloc(0), out);
      }
      // An engine that ends right after the completing line still gives a well-formed last event.
      if (state === 'closing') {
        out.push(closingEol);
        state = 'closed';
      }
      const bytes = Buffer.concat(out);
      if (bytes.length > 0) {
        hash?.update(bytes);
        sink.write(bytes);
      }
      if (state !== 'closed') {
        fail(new HttpError('upstream_bad_response', 'The engine ended the stream before it finished.'));
        return;
      }
      const result: Omit<SseRelayResult, 'droppedReceiptComments'> = { complete: true, clientGone: false };
      if (hash) result.responseHash = 'sha256:' + hash.digest('hex');
      finish(result);
    };

    const onError = (err: unknown) => {
      const failure = engineFailure(err);
      fail(failure.code === 'upstream_timeout' ? failure : new HttpError('upstream_bad_response', 'The engine connection failed before the stream finished.'));
    };
    const onDrain = () => source.resume();
    const onClose = () => {
      if (!sink.writableFinished && !ended) finish({ complete: false, clientGone: true });
    };

    const { cut } = options;
    const onCut = () => fail(cut!.reason as HttpError);
    if (cut?.aborted) return onCut();
    cut?.addEventListener('abort', onCut, { once: true });
    source.on('data', onChunk);
    source.on('end', onEnd);
    source.on('error', onError);
    sink.on('drain', onDrain);
    sink.on('close', onClose);
  });
}
