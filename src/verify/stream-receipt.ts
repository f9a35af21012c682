import { VerifyError } from './errors.ts';
import type { StreamEnding } from '../protocol/stream-ending.ts';

/** A streamed response cut where docs/receipts.md cuts it: the hashed body, and the trailing message receipt. */
export interface SplitStream {
  /** Every byte up to and including the `data: [DONE]` event's blank line: what `response_hash` covers. */
  body: Uint8Array;
  /** The JWS of the `: receipt <JWS>` comment after it. */
  receipt: string;
  /** The receipt's leaf index in the transparency log, from the `: log-index <N>` line a sealed stream adds (docs/log.md). */
  logIndex?: number;
}

/** `data: [DONE]` as a whole line (at the start of the body or after a line end), then its blank line. */
const DONE_EVENT = /(?:^|\r\n|\r|\n)data: ?\[DONE\](?:\r\n|\r|\n)(?:\r\n|\r|\n)$/;

/** The end of a body, long enough to hold the line end before `data: [DONE]`, or all of a short body. */
function tailOf(body: Buffer): string {
  return body.length <= 40
    ? body.toString('latin1')
    : body.toString('latin1', body.length - 40).replace(/^[^\r\n]*/, (head) => (head.length === 0 ? '' : '\u0000'));
}
const RECEIPT_COMMENT =
  /^: receipt ([A-Za-z0-9_-]+\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*)(?:\r\n|\r|\n)(?:: log-index (0|[1-9]\d{0,15})(?:\r\n|\r|\n))?(?:\r\n|\r|\n)?$/;
const MARKER = Buffer.from(': receipt ');

/** Finds the last `: receipt ` comment that starts a line. */
function lastCommentStart(bytes: Buffer): number {
  let at = bytes.lastIndexOf(MARKER);
  while (at > 0 && bytes[at - 1] !== 0x0a && bytes[at - 1] !== 0x0d) at = bytes.lastIndexOf(MARKER, at - 1);
  return at;
}

/** The end of an event: a line end, then the blank line. */
const EVENT_END = /(?:\r\n|\r|\n)(?:\r\n|\r|\n)$/;

/**
 * Splits a complete event-stream body; throws ERR_VERIFY_STREAM unless it ends with the receipt
 * comment (and, sealed, its leaf index line) right after the stream's end: `data: [DONE]` and its blank line for chat and completions
 * (the default), the end of the last event for `/v1/responses` streams (`ending: 'event'`), which
 * have no [DONE].
 */
export function splitReceiptStream(bytes: Uint8Array, options: { ending?: StreamEnding } = {}): SplitStream {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const start = lastCommentStart(buffer);
  if (start < 0) throw new VerifyError('ERR_VERIFY_STREAM', 'the stream carries no ": receipt <JWS>" comment');
  const comment = RECEIPT_COMMENT.exec(buffer.toString('latin1', start));
  if (comment === null) throw new VerifyError('ERR_VERIFY_STREAM', 'the stream does not end with one ": receipt <JWS>" comment and a blank line');
  const body = buffer.subarray(0, start);
  if (options.ending === 'event') {
    if (!EVENT_END.test(body.toString('latin1', Math.max(0, body.length - 4))))
      throw new VerifyError('ERR_VERIFY_STREAM', 'the receipt comment does not follow the end of an event');
  } else if (!DONE_EVENT.test(tailOf(body))) {
    throw new VerifyError('ERR_VERIFY_STREAM', 'the receipt comment does not follow a "data: [DONE]" event');
  }
  const split: SplitStream = { body: new Uint8Array(body), receipt: comment[1]! };
  if (comment[2] !== undefined && Number.isSafeInteger(Number(comment[2]))) split.logIndex = Number(comment[2]);
  return split;
}

/** Whether a complete event-stream body ends with `data: [DONE]` (no receipt comment after it). */
export function endsWithDone(bytes: Uint8Array): boolean {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return DONE_EVENT.test(tailOf(buffer));
}
