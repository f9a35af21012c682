import { createHash, type Hash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { HttpError, sseErrorEvent } from '../protocol/errors.ts';
import { engineFailure } from './engine-request.ts';

export interface TokenUsage {
  prompt_tokens: number;
  completion_tokens: number;
}

export interface SseRelayOptions {
  source: Readable;
  sink: ServerResponse;
  /** When set, every chunk's `model` is rewritten to this catalogue id (names differ); else bytes pass as they are. */
  rewriteModel: string | undefined;
  /** Hash the bytes sent and capture the completion id, for a message receipt. */
  forReceipt: boolean;
}

export interface SseRelayResult {
  /** The engine finished with `data: [DONE]` and the client got every byte. */
  complete: boolean;
  /** The client went away before the end. */
  clientGone: boolean;
  /** `sha256:` hex of every byte written, through `data: [DONE]\n\n` (when forReceipt). */
  responseHash?: string;
  completionId?: string;
  usage?: TokenUsage;
  /** Why the stream failed, when it did (already sent to the client as an error event). */
  error?: HttpError;
}

const LF = 0x0a;
const CR = 0x0d;
const DONE_TAIL = /data: ?\[DONE\][ \t]*(\r\n|\r|\n)?(\r\n|\r|\n)?$/;
const PROMPT_TOKENS = /"prompt_tokens"\s*:\s*(\d+)/;
const COMPLETION_TOKENS = /"completion_tokens"\s*:\s*(\d+)/;

/** Splits a byte stream into lines, keeping each line's own terminator; CR and LF never occur inside UTF-8 sequences. */
class LineSplitter {
  #pending: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): Array<{ line: Buffer; eol: Buffer }> {
    const data = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    const out: Array<{ line: Buffer; eol: Buffer }> = [];
    let start = 0;
    for (let i = 0; i < data.length; i++) {
      const byte = data[i];
      if (byte !== LF && byte !== CR) continue;
      // A CRLF split across chunks comes out as CR, then an empty line ending in LF: the same bytes, never held back.
      const eolLength = byte === CR && data[i + 1] === LF ? 2 : 1;
      out.push({ line: data.subarray(start, i), eol: data.subarray(i, i + eolLength) });
      i += eolLength - 1;
      start = i + 1;
    }
    this.#pending = Buffer.from(data.subarray(start));
    return out;
  }

  /** What is left when the source ends: a last line without terminator. */
  rest(): Buffer {
    return this.#pending;
  }
}

function rewriteDataLine(line: Buffer, model: string, seen: (chunk: Record<string, unknown>) => void): Buffer {
  if (line.length < 5 || line.toString('latin1', 0, 5) !== 'data:') return line;
  const payload = line.toString('utf8', line[5] === 0x20 ? 6 : 5);
  if (payload === '[DONE]') return line;
  let chunk: unknown;
  try {
    chunk = JSON.parse(payload);
  } catch {
    return line;
  }
  if (chunk === null || typeof chunk !== 'object' || Array.isArray(chunk)) return line;
  const record = chunk as Record<string, unknown>;
  seen(record);
  if (!('model' in record)) return line;
  record.model = model;
  return Buffer.from(`data: ${JSON.stringify(record)}`);
}

function usageFrom(value: unknown): TokenUsage | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const { prompt_tokens, completion_tokens } = value as Record<string, unknown>;
  if (typeof prompt_tokens !== 'number' || typeof completion_tokens !== 'number') return undefined;
  return { prompt_tokens, completion_tokens };
}

/**
 * Relays an engine's SSE stream to the client as it arrives: each engine chunk is written as soon as
 * it is read (no buffering, no re-chunking), with backpressure. Optionally hashes what was written
 * and rewrites `model` per event. A stream that fails ends with one error event and no `[DONE]`.
 */
export function teeSseStream(options: SseRelayOptions): Promise<SseRelayResult> {
  const { source, sink, rewriteModel, forReceipt } = options;
  const hash: Hash | undefined = forReceipt ? createHash('sha256') : undefined;
  const splitter = rewriteModel === undefined ? undefined : new LineSplitter();
  let tail = '';
  let completionId: string | undefined;
  let usage: TokenUsage | undefined;
  let idProbe: Buffer | undefined = forReceipt && splitter === undefined ? Buffer.alloc(0) : undefined;

  const seen = (chunk: Record<string, unknown>) => {
    if (completionId === undefined && typeof chunk.id === 'string') completionId = chunk.id;
    const u = usageFrom(chunk.usage);
    if (u) usage = u;
  };

  const write = (bytes: Buffer): boolean => {
    if (bytes.length === 0) return true;
    hash?.update(bytes);
    tail = (tail + bytes.toString('latin1', Math.max(0, bytes.length - 32))).slice(-32);
    return sink.write(bytes);
  };

  // Pass-through mode reads nothing of the events but the first one's id (for a receipt) and the usage numbers (for the log).
  const observe = (chunk: Buffer) => {
    if (idProbe !== undefined) {
      idProbe = Buffer.concat([idProbe, chunk]);
      const match = /"id"\s*:\s*"([^"\\]{1,256})"/.exec(idProbe.toString('utf8'));
      if (match) {
        completionId = match[1];
        idProbe = undefined;
      } else if (idProbe.length > 65_536) idProbe = undefined;
    }
    if (chunk.includes('"prompt_tokens"')) {
      const text = chunk.toString('utf8');
      const p = PROMPT_TOKENS.exec(text);
      const c = COMPLETION_TOKENS.exec(text);
      if (p && c) usage = { prompt_tokens: Number(p[1]), completion_tokens: Number(c[1]) };
    }
  };

  return new Promise((resolve) => {
    let settled = false;
    const finish = (result: SseRelayResult) => {
      if (settled) return;
      settled = true;
      source.off('data', onData);
      source.off('end', onEnd);
      source.off('error', onError);
      sink.off('drain', onDrain);
      sink.off('close', onClose);
      if (result.clientGone || result.error) source.destroy();
      if (usage) result.usage = usage;
      if (completionId !== undefined) result.completionId = completionId;
      resolve(result);
    };

    const onData = (chunk: Buffer) => {
      let ok: boolean;
      if (splitter) {
        const parts = splitter.push(chunk);
        const pieces: Buffer[] = [];
        for (const { line, eol } of parts) pieces.push(rewriteDataLine(line, rewriteModel!, seen), eol);
        ok = write(Buffer.concat(pieces));
      } else {
        observe(chunk);
        ok = write(chunk);
      }
      if (!ok) source.pause();
    };

    const fail = (error: HttpError) => {
      if (!sink.destroyed && !sink.writableEnded) sink.end(sseErrorEvent(error));
      finish({ complete: false, clientGone: false, error });
    };

    const onEnd = () => {
      if (splitter) {
        const rest = splitter.rest();
        if (rest.length > 0) write(rewriteDataLine(rest, rewriteModel!, seen));
      }
      const done = DONE_TAIL.exec(tail);
      if (!done) {
        fail(new HttpError('upstream_bad_response', 'The engine ended the stream before it finished.'));
        return;
      }
      // An engine that ends `data: [DONE]` without its blank line still gets a well-formed last event.
      if (done[2] === undefined) write(Buffer.from(done[1] === undefined ? '\n\n' : done[1]));
      const result: SseRelayResult = { complete: true, clientGone: false };
      if (hash) result.responseHash = 'sha256:' + hash.digest('hex');
      finish(result);
    };

    const onError = (err: unknown) => {
      const failure = engineFailure(err);
      fail(failure.code === 'upstream_timeout' ? failure : new HttpError('upstream_bad_response', 'The engine connection failed before the stream finished.'));
    };
    const onDrain = () => source.resume();
    const onClose = () => {
      if (!sink.writableFinished) finish({ complete: false, clientGone: true });
    };

    source.on('data', onData);
    source.on('end', onEnd);
    source.on('error', onError);
    sink.on('drain', onDrain);
    sink.on('close', onClose);
  });
}
