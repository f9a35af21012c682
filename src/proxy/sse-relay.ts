import { createHash, type Hash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { HttpError, sseErrorEvent } from '../protocol/errors.ts';
import { editJsonObject, scanJsonObject } from '../protocol/json-edit.ts';
import { engineFailure } from './engine-request.ts';
import { STREAM_ENDING_RULES, type StreamEnding } from '../protocol/stream-ending.ts';
import { EventStreamLines } from '../protocol/event-stream-lines.ts';
import { isReceiptCommentLine } from '../protocol/receipt-comment.ts';
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
const DONE_PAYLOAD = STREAM_ENDING_RULES.done.endData!;
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

/** A joined line as a Buffer (no copy): the relay reads it with Buffer's methods. */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
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
  return new SseTee(options).run();
}

/**
 * One relayed stream: its line state is its fields, each event of the engine's stream, the client's socket and the
 * limits is a method. The lines come from the one event-stream reader (src/protocol/event-stream-lines.ts).
 */
export class SseTee {
  private readonly source: Readable;
  private readonly sink: ServerResponse;
  private readonly forReceipt: boolean;
  private readonly maxEventBytes: number;
  private readonly maxStreamBytes: number;
  private readonly padTo: number | undefined;
  private readonly readUsage: (event: Record<string, unknown>) => TokenUsage | undefined;
  private readonly hash: Hash | undefined;
  private readonly modelJson: string | undefined;
  /** The stream ends with its last event (`response.completed`) rather than `data: [DONE]`. */
  private readonly endEventType: string | undefined;
  /** The end event's type as bytes: a chunk without them cannot hold it. */
  private readonly endEventBytes: Buffer | undefined;
  private readonly lines: EventStreamLines;
  /**
   * `open` until the completing line (`data: [DONE]`, or the data of the `response.completed` event)
   * is relayed; `closing` until its blank line is; then `closed`, and everything after is dropped.
   */
  private state: 'open' | 'closing' | 'closed' = 'open';
  /** The completing line's terminator, to end its event when the engine does not. */
  private closingEol: Buffer = Buffer.from('\n');
  private lastEventType = '';
  private completionId: string | undefined;
  private usage: TokenUsage | undefined;
  private dropped = 0;
  private sentBytes = 0;
  /** Bytes the engine sent after the completing event, all dropped. */
  private afterEndBytes = 0;
  /** The last byte written (LF before the first write: the stream starts a line). */
  private lastByte = LF;
  /** The last line's own line end went out (an LF finishing its CRLF in the next chunk goes out with it). */
  private sentLastEol = true;
  /** The bytes handleLine sends instead of a line, when it returns EDIT or SUBSTITUTE. */
  private replacement: Buffer = Buffer.alloc(0);
  /**
   * False while relaying lines of a chunk that holds neither `"usage"` nor (for the event rule) `response.completed`:
   * none of its lines can carry what an unparsed event may hold.
   */
  private mayMatter = true;
  private settled = false;
  private ended = false;
  private deadline: NodeJS.Timeout | undefined;
  private resolve: (result: SseRelayResult) => void = ignore;

  constructor(private readonly options: SseRelayOptions) {
    this.source = options.source;
    this.sink = options.sink;
    this.forReceipt = options.forReceipt;
    this.maxEventBytes = options.maxEventBytes;
    this.maxStreamBytes = options.maxStreamBytes ?? Number.POSITIVE_INFINITY;
    this.padTo = options.padTo;
    this.readUsage = options.readUsage ?? chatUsage;
    this.hash = options.forReceipt ? createHash('sha256') : undefined;
    this.modelJson = options.rewriteModel === undefined ? undefined : JSON.stringify(options.rewriteModel);
    this.endEventType = options.completion === 'event' ? (options.completingEvent ?? STREAM_ENDING_RULES.event.endEventType) : undefined;
    this.endEventBytes = this.endEventType === undefined ? undefined : Buffer.from(this.endEventType);
    this.lines = new EventStreamLines(options.maxEventBytes);
    this.onChunk = this.onChunk.bind(this);
    this.onEnd = this.onEnd.bind(this);
    this.onError = this.onError.bind(this);
    this.onDrain = this.onDrain.bind(this);
    this.onClose = this.onClose.bind(this);
    this.onCut = this.onCut.bind(this);
  }

  /** Relays until the stream completes, fails or the client goes away. */
  run(): Promise<SseRelayResult> {
    return new Promise((resolve) => {
      this.resolve = resolve;
      const { cut, maxStreamMs } = this.options;
      if (cut?.aborted) return this.onCut();
      if (maxStreamMs !== undefined) {
        this.deadline = setTimeout(
          () => this.fail(new HttpError('upstream_timeout', `The stream ran longer than limits.max_stream_seconds (${maxStreamMs / 1000} s) and was ended.`)),
          maxStreamMs,
        );
      }
      cut?.addEventListener('abort', this.onCut, { once: true });
      this.source.on('data', this.onChunk);
      this.source.on('end', this.onEnd);
      this.source.on('error', this.onError);
      this.sink.on('drain', this.onDrain);
      this.sink.on('close', this.onClose);
    });
  }

  /**
   * Relays a chunk's complete lines. Lines sent as they came are sent as the chunk's own bytes (the
   * whole chunk when nothing changed, the usual case); only edits, drops and lines begun in an earlier
   * chunk make a new buffer.
   */
  onChunk(chunk: Buffer): void {
    const { lines } = this;
    const wasOpen = this.state === 'open';
    let out: Buffer[] | undefined;
    const firstLine = lines.push(chunk);
    // The bytes of this chunk sent as they came and not yet in `out`. An LF finishing a CRLF whose CR was sent goes
    // out with them; one whose CR was not, is not sent either.
    let runStart = this.sentLastEol ? 0 : firstLine;
    let runEnd = firstLine;
    const chunkMayMatter = chunk.includes(USAGE) || (this.endEventBytes !== undefined && chunk.includes(this.endEventBytes));
    this.mayMatter = chunkMayMatter;
    while (!this.settled && lines.nextLine()) {
      const eolEnd = lines.eolEnd;
      let action: number;
      if (!lines.joined) {
        action = this.handleLine(chunk, lines.start, lines.end, eolEnd);
        this.sentLastEol = action === PASS || action === EDIT;
      } else {
        // A line begun in an earlier chunk: joined with its terminator, and sent (if it is) as that new buffer.
        const line = asBuffer(lines.bytes);
        this.mayMatter = true;
        action = this.handleLine(line, 0, lines.end, line.length);
        this.sentLastEol = action === PASS || action === EDIT;
        if (action === PASS) {
          action = SUBSTITUTE;
          this.replacement = line;
        }
        this.mayMatter = chunkMayMatter;
      }
      const lineEnd = lines.restStart;
      // Past the end nothing is relayed; an engine that goes on is cut after one event's worth, blank lines or not.
      if (action === DROP && this.state === 'closed' && (this.afterEndBytes += lines.eolEnd - lines.start) > this.maxEventBytes) return this.tooLarge();
      if (action === PASS) {
        runEnd = lineEnd;
      } else {
        out ??= [];
        if (runEnd > runStart) out.push(chunk.subarray(runStart, runEnd));
        if (action !== DROP && this.replacement.length > 0) out.push(this.replacement);
        runStart = runEnd = lineEnd;
      }
    }
    if (this.settled) return;
    if (lines.overflow) return this.tooLarge();
    let bytes: Buffer;
    if (out === undefined) {
      if (runEnd === runStart) return;
      bytes = runEnd - runStart === chunk.length ? chunk : chunk.subarray(runStart, runEnd);
    } else {
      if (runEnd > runStart) out.push(chunk.subarray(runStart, runEnd));
      if (out.length === 0) return;
      bytes = out.length === 1 ? out[0]! : Buffer.concat(out);
    }
    this.send(this.padded(bytes, wasOpen));
  }

  /** The engine ended its stream: a last line without its terminator is relayed as sent, then the stream completes or fails. */
  onEnd(): void {
    this.ended = true;
    const { lines } = this;
    const wasOpen = this.state === 'open';
    const out: Buffer[] = [];
    if (lines.lastLine()) {
      const line = asBuffer(lines.bytes);
      this.mayMatter = true;
      const action = this.handleLine(line, 0, line.length, line.length);
      if (action === PASS) out.push(line);
      else if (action !== DROP) out.push(this.replacement);
    }
    // An engine that ends right after the completing line still gives a well-formed last event.
    if (this.state === 'closing') {
      out.push(this.closingEol);
      this.state = 'closed';
    }
    const bytes = this.padded(Buffer.concat(out), wasOpen);
    this.sentBytes += bytes.length;
    if (this.sentBytes > this.maxStreamBytes) return this.tooLong();
    if (bytes.length > 0) {
      this.hash?.update(bytes);
      this.sink.write(bytes);
    }
    if (this.state !== 'closed') return this.fail(new HttpError('upstream_bad_response', 'The engine ended the stream before it finished.'));
    const result: Omit<SseRelayResult, 'droppedReceiptComments'> = { complete: true, clientGone: false };
    if (this.hash) result.responseHash = 'sha256:' + this.hash.digest('hex');
    this.finish(result);
  }

  onError(err: unknown): void {
    const failure = engineFailure(err);
    this.fail(
      failure.code === 'upstream_timeout' ? failure : new HttpError('upstream_bad_response', 'The engine connection failed before the stream finished.'),
    );
  }

  onDrain(): void {
    this.source.resume();
  }

  onClose(): void {
    if (!this.sink.writableFinished && !this.ended) this.finish({ complete: false, clientGone: true });
  }

  /** The shutdown's grace is over: the stream ends with the cut's error event. */
  onCut(): void {
    this.fail(this.options.cut!.reason as HttpError);
  }

  /** Writes, counts and hashes bytes for the client, pausing the engine while the client's socket is full. */
  private send(bytes: Buffer): void {
    this.sentBytes += bytes.length;
    if (this.sentBytes > this.maxStreamBytes) return this.tooLong();
    this.lastByte = bytes[bytes.length - 1]!;
    this.hash?.update(bytes);
    if (!this.sink.write(bytes)) this.source.pause();
  }

  /**
   * A write padded (when asked) so its length hides the tokens in it. The padding line goes after the write when it ends
   * a line and the stream is still open; a write that reaches the completing event gets it before (the completing event
   * must end the hashed bytes, which the verifier cuts there); a write that only finishes the completing event
   * (`wasOpen` false), or starts inside a CRLF, is not padded.
   */
  private padded(bytes: Buffer, wasOpen: boolean): Buffer {
    const { padTo } = this;
    if (padTo === undefined || bytes.length === 0 || !wasOpen) return bytes;
    if (this.state === 'open' && bytes[bytes.length - 1] === LF) return padSseWrite(bytes, padTo, 'after');
    if (this.lastByte === LF || (this.lastByte === CR && bytes[0] !== LF)) return padSseWrite(bytes, padTo, 'before');
    return bytes;
  }

  /** Handles one complete line, `buf` from `start` to `end`, its terminator to `eolEnd` (none at the very end of a stream). */
  private handleLine(buf: Buffer, start: number, end: number, eolEnd: number): number {
    if (this.state === 'closed') return DROP;
    if (this.state === 'closing') {
      // The blank line after the completing line; anything else is the engine going on past the end.
      this.state = 'closed';
      if (end === start) return PASS;
      this.replacement = this.closingEol;
      return SUBSTITUTE;
    }
    if (end === start) return PASS;
    if (isReceiptCommentLine(buf, start, end)) {
      this.dropped++;
      return DROP;
    }
    if (isDataLine(buf, start, end)) {
      const action = this.onData(buf, start, start + 5 < end && buf[start + 5] === SPACE ? start + 6 : start + 5, end, eolEnd);
      // onData may have moved the state on (TypeScript cannot see that through the call).
      if ((this.state as string) === 'closing') this.closingEol = eolEnd === end ? Buffer.from('\n\n') : buf.subarray(end, eolEnd);
      return action;
    }
    if (this.endEventType !== undefined && buf.toString('latin1', start, Math.min(end, start + 6)) === 'event:') {
      this.lastEventType = buf.toString('utf8', start + 6 < end && buf[start + 6] === SPACE ? start + 7 : start + 6, end).trim();
    }
    return PASS;
  }

  /** Reads what Sigil needs of one data line (its payload from `payloadStart`); EDIT when renaming changed it. */
  private onData(buf: Buffer, start: number, payloadStart: number, end: number, eolEnd: number): number {
    const { endEventType, modelJson } = this;
    if (end - payloadStart === DONE_PAYLOAD.length && buf.toString('latin1', payloadStart, end) === DONE_PAYLOAD) {
      if (endEventType === undefined) this.state = 'closing';
      return PASS;
    }
    const wantId = this.forReceipt && this.completionId === undefined;
    // Only events that can matter are parsed: the first (its id), those with usage, or all when renaming.
    if (modelJson === undefined && !wantId) {
      if (!this.mayMatter) return PASS;
      const payload = buf.subarray(payloadStart, end);
      if (!payload.includes(USAGE) && !(this.endEventBytes !== undefined && payload.includes(this.endEventBytes))) return PASS;
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
    const inner = endEventType !== undefined ? (record.response ?? record.message) : undefined;
    const nested = typeof inner === 'object' && inner !== null ? (inner as Record<string, unknown>) : undefined;
    const id = typeof record.id === 'string' ? record.id : typeof nested?.id === 'string' ? nested.id : undefined;
    if (this.completionId === undefined && id !== undefined) this.completionId = id;
    const u = this.readUsage(record) ?? (nested === undefined ? undefined : this.readUsage(nested));
    // An event that counts the output alone (a Messages `message_delta`) keeps the input count read before it.
    if (u !== undefined)
      this.usage = u.prompt_tokens === 0 && this.usage !== undefined ? { prompt_tokens: this.usage.prompt_tokens, completion_tokens: u.completion_tokens } : u;
    if (endEventType !== undefined && (record.type === endEventType || this.lastEventType === endEventType)) this.state = 'closing';
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
    this.replacement = Buffer.concat([buf.subarray(start, payloadStart), editJsonObject(payload, scan, { set }), buf.subarray(end, eolEnd)]);
    return EDIT;
  }

  private tooLong(): void {
    this.fail(new HttpError('upstream_bad_response', `The stream grew past limits.max_stream_bytes (${this.maxStreamBytes} bytes) and was ended.`));
  }

  private tooLarge(): void {
    this.fail(new HttpError('upstream_bad_response', `The engine sent a stream event larger than ${this.maxEventBytes} bytes (limits.max_sse_event_bytes).`));
  }

  /** Ends the client's stream with one error event. */
  private fail(error: HttpError): void {
    if (!this.sink.destroyed && !this.sink.writableEnded) this.sink.end(this.padded(Buffer.from((this.options.errorEvent ?? sseErrorEvent)(error)), true));
    this.finish({ complete: false, clientGone: false, error });
  }

  private finish(result: Omit<SseRelayResult, 'droppedReceiptComments'>): void {
    if (this.settled) return;
    this.settled = true;
    const { source, sink } = this;
    source.off('data', this.onChunk);
    source.off('end', this.onEnd);
    source.off('error', this.onError);
    sink.off('drain', this.onDrain);
    sink.off('close', this.onClose);
    this.options.cut?.removeEventListener('abort', this.onCut);
    if (this.deadline !== undefined) clearTimeout(this.deadline);
    if (result.clientGone || result.error) {
      // Cancels the engine request; the abort error it raises has nobody left to tell.
      source.on('error', ignore);
      source.destroy();
    }
    const out: SseRelayResult = { ...result, droppedReceiptComments: this.dropped };
    if (this.usage) out.usage = this.usage;
    if (this.completionId !== undefined) out.completionId = this.completionId;
    this.resolve(out);
  }
}
