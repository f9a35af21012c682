import { VerifyError } from './errors.ts';
import { RECEIPT_COMMENT_MARKER, readReceiptComment } from '../protocol/receipt-comment.ts';
import { endsWhereStreamEnds, type StreamEnding } from '../protocol/stream-ending.ts';

/** A streamed response cut where docs/receipts.md cuts it: the hashed body, and the trailing message receipt. */
export interface SplitStream {
  /** Every byte up to and including the `data: [DONE]` event's blank line: what `response_hash` covers. */
  body: Uint8Array;
  /** The JWS of the `: receipt <JWS>` comment after it. */
  receipt: string;
  /** The receipt's leaf index in the transparency log, from the `: log-index <N>` line a sealed stream adds (docs/log.md). */
  logIndex?: number;
}

/** The marker as a Buffer: the browser's Buffer finds only a Buffer, a string or a byte. */
const MARKER = Buffer.from(RECEIPT_COMMENT_MARKER);

/** Finds the last `: receipt ` comment that starts a line. */
function lastCommentStart(bytes: Buffer): number {
  let at = bytes.lastIndexOf(MARKER);
  while (at > 0 && bytes[at - 1] !== 0x0a && bytes[at - 1] !== 0x0d) at = bytes.lastIndexOf(MARKER, at - 1);
  return at;
}

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
  const comment = readReceiptComment(buffer.subarray(start));
  if (comment === undefined) throw new VerifyError('ERR_VERIFY_STREAM', 'the stream does not end with one ": receipt <JWS>" comment and a blank line');
  const body = buffer.subarray(0, start);
  const ending = options.ending ?? 'done';
  if (!endsWhereStreamEnds(body, ending)) {
    throw new VerifyError(
      'ERR_VERIFY_STREAM',
      ending === 'event' ? 'the receipt comment does not follow the end of an event' : 'the receipt comment does not follow a "data: [DONE]" event',
    );
  }
  const split: SplitStream = { body: new Uint8Array(body), receipt: comment.receipt };
  if (comment.logIndex !== undefined) split.logIndex = comment.logIndex;
  return split;
}

/** Whether a complete event-stream body ends with `data: [DONE]` (no receipt comment after it). */
export function endsWithDone(bytes: Uint8Array): boolean {
  return endsWhereStreamEnds(bytes, 'done');
}
