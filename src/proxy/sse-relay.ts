import { createHash, type Hash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { HttpError, sseErrorEvent } from '../protocol/errors.ts';
import { editJsonObject, scanJsonObject } from '../protocol/json-edit.ts';
import { engineFailure } from './engine-request.ts';
import type { StreamEnding } from '../protocol/stream-ending.ts';
import { padSseWrite } from '../protocol/sse-padding.ts';

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
  /** With the `event` ending, the `type` of the event that ends the stream; default `response.completed`. */
  completingEvent?: string;
  /** The event a failed stream ends with; default OpenAI's `data: {"error":...}` (src/protocol/errors.ts). */
  errorEvent?: (error: HttpError) => string;
  /** One event larger than this ends the stream with an error event and cancels the engine request. */
  maxEventBytes: number;
  /** Reads the token counts from an event's JSON (endpoints name them differently). Default: chat's usage. */
  readUsage?: (event: Record<string, unknown>) => TokenUsage | undefined;
  /** Aborted with an HttpError as its reason: the stream ends with that error event (a shutdown's grace is over). */
  cut?: AbortSignal;
  /** A stream still running after this long ends with an error event and cancels the engine request. */
  maxStreamMs?: number;
  /** A write that would take the bytes sent past this ends the stream with an error event instead. */
  maxStreamBytes?: number;
  /**
   * Pad every write to a multiple of this many bytes with an SSE comment line (sealed streams: docs/ehbp.md, "Padding").
   * The padding is hashed with the rest: the receipt binds exactly the bytes the client gets.
   */
  padTo?: number;
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
const SPACE = 0x20;
const RECEIPT_COMMENT = /^: ?receipt(?:[ \t]|$)/;
const DONE_PAYLOAD = '[DONE]';
const USAGE = Buffer.from('"usage"');
const ignore = () => undefined;

/** What became of one line. */
const PASS = 0; // sent as it came, with its terminator
const DROP = 1; // not sent
const EDIT = 2; // `replacement` sent instead: the line edited, with its terminator
const SUBSTITUTE = 3; // `replacement` sent instead of the line and its terminator

/** Whether the line at `start` is a `data:` line. */
function isDataLine(buf: Buffer, start: number, end: number): boolean {
  return end - start >= 5 && buf[start] === 0x64 && buf[start + 1] === 0x61 && buf[start + 2] === 0x74 && buf[start + 3] === 0x61 && buf[start + 4] === COLON;
}

/** Chat's and completions' usage object. */
export function chatUsage(event: Record<string, unknown>): TokenUsage | undefined {
  const value = event.usage;
  if (value === null || typeof value !== 'object') return undefined;
  const { prompt_tokens, completion_tokens } = value as Record<string, unknown>;
  if (typeof prompt_tokens !== 'number' || typeof completion_tokens !== 'number') return undefined;
  return { prompt_tokens, completion_tokens };
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
  const completingEvent = options.completingEvent ?? 'response.completed';
  const COMPLETED = Buffer.from(completingEvent);
  const errorEvent = options.errorEvent ?? sseErrorEvent;
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
  let sentBytes = 0;
  const maxStreamBytes = options.maxStreamBytes ?? Number.POSITIVE_INFINITY;
  const padTo = options.padTo;
  /** The last byte written (LF before the first write: the stream starts a line). */
  let lastByte = LF;

  /**
   * A write padded (when asked) so its length hides the tokens in it. The padding line goes after the write when it ends
   * a line and the stream is still open; a write that reaches the completing event gets it before (the completing event
   * must end the hashed bytes, which the verifier cuts there); a write that only finishes the completing event
   * (`wasOpen` false), or starts inside a CRLF, is not padded.
   */
  const padded = (bytes: Buffer, wasOpen: boolean): Buffer => {
    if (padTo === undefined || bytes.length === 0 || !wasOpen) return bytes;
    if (state === 'open' && bytes[bytes.length - 1] === LF) return padSseWrite(bytes, padTo, 'after');
    if (lastByte === LF || (lastByte === CR && bytes[0] !== LF)) return padSseWrite(bytes, padTo, 'before');
    return bytes;
  };

  /** The bytes handleLine sends instead of a line, when it returns EDIT or SUBSTITUTE. */
  let replacement: Buffer = Buffer.alloc(0);
  /**
   * False while relaying lines of a chunk that holds neither `"usage"` nor (for the event rule) `response.completed`:
   * none of its lines can carry what an unparsed event may hold.
   */
  let mayMatter = true;

  /** Reads what Sigil needs of one data line (its payload from `payloadStart`); EDIT when renaming changed it. */
  const onData = (buf: Buffer, start: number, payloadStart: number, end: number, eolEnd: number): number => {
    if (end - payloadStart === DONE_PAYLOAD.length && buf.toString('latin1', payloadStart, end) === DONE_PAYLOAD) {
      if (completion === 'done') state = 'closing';
      return PASS;
    }
    const wantId = forReceipt && completionId === undefined;
    // Only events that can matter are parsed: the first (its id), those with usage, or all when renaming.
    if (modelJson === undefined && !wantId) {
      if (!mayMatter) return PASS;
      const payload = buf.subarray(payloadStart, end);
      if (!payload.includes(USAGE) && !(completion === 'event' && payload.includes(COMPLETED))) return PASS;
    }
    let event: unknown;
    try {
      event = JSON.parse(buf.toString('utf8', payloadStart, end));
    } catch {
      return PASS;
    }
    if (event === null || typeof event !== 'object' || Array.isArray(event)) return PASS;
    const record = event as Record<string, unknown>;
    // The Responses API nests the response (its id, its usage) in its events, the Messages API the message in `message_start`.
    const inner = completion === 'event' ? (record.response ?? record.message) : undefined;
    const nested = typeof inner === 'object' && inner !== null ? (inner as Record<string, unknown>) : undefined;
    const id = typeof record.id === 'string' ? record.id : typeof nested?.id === 'string' ? nested.id : undefined;
    if (completionId === undefined && id !== undefined) completionId = id;
    const u = readUsage(record) ?? (nested === undefined ? undefined : readUsage(nested));
    // An event that counts the output alone (a Messages `message_delta`) keeps the input count read before it.
    if (u !== undefined)
      usage = u.prompt_tokens === 0 && usage !== undefined ? { prompt_tokens: usage.prompt_tokens, completion_tokens: u.completion_tokens } : u;
    if (completion === 'event' && (record.type === completingEvent || lastEventType === completingEvent)) state = 'closing';
    if (modelJson === undefined) return PASS;
    const inMessage = nested !== undefined && record.message === nested && 'model' in nested;
    if (!('model' in record) && !inMessage) return PASS;
    const payload = buf.subarray(payloadStart, end);
    const scan = scanJsonObject(payload);
    if (scan.duplicate !== undefined) return PASS;
    const set: Record<string, string> = {};
    if ('model' in record) set.model = modelJson;
    if (inMessage) {
      // A Messages `message_start` names the model inside its message: that value alone is edited there.
      const member = scan.members.find((m) => m.key === 'message')!;
      const message = payload.subarray(member.valueStart, member.valueEnd);
      set.message = editJsonObject(message, scanJsonObject(message), { set: { model: modelJson } }).toString('utf8');
    }
    replacement = Buffer.concat([buf.subarray(start, payloadStart), editJsonObject(payload, scan, { set }), buf.subarray(end, eolEnd)]);
    return EDIT;
  };

  /** Handles one complete line, `buf` from `start` to `end`, its terminator to `eolEnd` (none at the very end of a stream). */
  const handleLine = (buf: Buffer, start: number, end: number, eolEnd: number): number => {
    if (state === 'closed') return DROP;
    if (state === 'closing') {
      // The blank line after the completing line; anything else is the engine going on past the end.
      state = 'closed';
      if (end === start) return PASS;
      replacement = closingEol;
      return SUBSTITUTE;
    }
    if (end === start) {
      eventBytes = 0;
      return PASS;
    }
    if (buf[start] === COLON && RECEIPT_COMMENT.test(buf.toString('latin1', start, Math.min(end, start + 16)))) {
      dropped++;
      return DROP;
    }
    if (isDataLine(buf, start, end)) {
      const action = onData(buf, start, start + 5 < end && buf[start + 5] === SPACE ? start + 6 : start + 5, end, eolEnd);
      // onData may have moved the state on (TypeScript cannot see that through the call).
      if ((state as string) === 'closing') closingEol = eolEnd === end ? Buffer.from('\n\n') : buf.subarray(end, eolEnd);
      return action;
    }
    if (completion === 'event' && buf.toString('latin1', start, Math.min(end, start + 6)) === 'event:') {
      lastEventType = buf.toString('utf8', start + 6 < end && buf[start + 6] === SPACE ? start + 7 : start + 6, end).trim();
    }
    return PASS;
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
      if (deadline !== undefined) clearTimeout(deadline);
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
      if (!sink.destroyed && !sink.writableEnded) sink.end(padded(Buffer.from(errorEvent(error)), true));
      finish({ complete: false, clientGone: false, error });
    };

    const tooLong = () => fail(new HttpError('upstream_bad_response', `The stream grew past limits.max_stream_bytes (${maxStreamBytes} bytes) and was ended.`));

    const tooLarge = () =>
      fail(new HttpError('upstream_bad_response', `The engine sent a stream event larger than ${maxEventBytes} bytes (limits.max_sse_event_bytes).`));

    /**
     * Relays a chunk's complete lines. Lines sent as they came are sent as the chunk's own bytes (the
     * whole chunk when nothing changed, the usual case); only edits, drops and lines begun in an earlier
     * chunk make a new buffer.
     */
    const onChunk = (chunk: Buffer) => {
      const wasOpen = state === 'open';
      let out: Buffer[] | undefined;
      /** The bytes of this chunk sent as they came and not yet in `out`. */
      let runStart = 0;
      let runEnd = 0;
      let start = 0;
      if (afterCr && chunk[0] === LF) {
        // The second half of a CRLF whose CR ended the previous chunk and was sent: the same bytes, no new line.
        runEnd = start = 1;
      }
      afterCr = false;
      const chunkMayMatter = chunk.includes(USAGE) || (completion === 'event' && chunk.includes(COMPLETED));
      mayMatter = chunkMayMatter;
      let nextLf = chunk.indexOf(LF, start);
      let nextCr = chunk.indexOf(CR, start);
      while (!settled && (nextLf !== -1 || nextCr !== -1)) {
        const at = nextCr === -1 ? nextLf : nextLf === -1 ? nextCr : Math.min(nextLf, nextCr);
        const crlf = chunk[at] === CR && chunk[at + 1] === LF;
        const eolEnd = at + (crlf ? 2 : 1);
        eventBytes += pendingLength + eolEnd - start;
        if (eventBytes > maxEventBytes) return tooLarge();
        let action: number;
        /** The line's own terminator went out (a CR ending this chunk then pairs with an LF starting the next). */
        let sentEol: boolean;
        if (pendingLength === 0) {
          action = handleLine(chunk, start, at, eolEnd);
          sentEol = action === PASS || action === EDIT;
        } else {
          // A line begun in an earlier chunk: joined with its terminator, and sent (if it is) as that new buffer.
          const line = Buffer.concat([...pending, chunk.subarray(start, eolEnd)], pendingLength + eolEnd - start);
          pending = [];
          pendingLength = 0;
          mayMatter = true;
          action = handleLine(line, 0, line.length - (eolEnd - at), line.length);
          sentEol = action === PASS || action === EDIT;
          if (action === PASS) {
            action = SUBSTITUTE;
            replacement = line;
          }
          mayMatter = chunkMayMatter;
        }
        if (action === PASS) {
          runEnd = eolEnd;
        } else {
          out ??= [];
          if (runEnd > runStart) out.push(chunk.subarray(runStart, runEnd));
          if (action !== DROP && replacement.length > 0) out.push(replacement);
          runStart = runEnd = eolEnd;
        }
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
      let bytes: Buffer;
      if (out === undefined) {
        if (runEnd === runStart) return;
        bytes = runEnd - runStart === chunk.length ? chunk : chunk.subarray(runStart, runEnd);
      } else {
        if (runEnd > runStart) out.push(chunk.subarray(runStart, runEnd));
        if (out.length === 0) return;
        bytes = out.length === 1 ? out[0]! : Buffer.concat(out);
      }
      bytes = padded(bytes, wasOpen);
      sentBytes += bytes.length;
      if (sentBytes > maxStreamBytes) return tooLong();
      lastByte = bytes[bytes.length - 1]!;
      hash?.update(bytes);
      if (!sink.write(bytes)) source.pause();
    };

    const onEnd = () => {
      ended = true;
      const wasOpen = state === 'open';
      const out: Buffer[] = [];
      if (pendingLength > 0) {
        // A last line without its terminator: relayed as sent.
        const line = Buffer.concat(pending, pendingLength);
        pending = [];
        pendingLength = 0;
        mayMatter = true;
        const action = handleLine(line, 0, line.length, line.length);
        if (action === PASS) out.push(line);
        else if (action !== DROP) out.push(replacement);
      }
      // An engine that ends right after the completing line still gives a well-formed last event.
      if (state === 'closing') {
        out.push(closingEol);
        state = 'closed';
      }
      const bytes = padded(Buffer.concat(out), wasOpen);
      sentBytes += bytes.length;
      if (sentBytes > maxStreamBytes) return tooLong();
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

    const { cut, maxStreamMs } = options;
    const onCut = () => fail(cut!.reason as HttpError);
    if (cut?.aborted) return onCut();
    const deadline =
      maxStreamMs === undefined
        ? undefined
        : setTimeout(
            () => fail(new HttpError('upstream_timeout', `The stream ran longer than limits.max_stream_seconds (${maxStreamMs / 1000} s) and was ended.`)),
            maxStreamMs,
          );
    cut?.addEventListener('abort', onCut, { once: true });
    source.on('data', onChunk);
    source.on('end', onEnd);
    source.on('error', onError);
    sink.on('drain', onDrain);
    sink.on('close', onClose);
  });
}
