import { EventStreamLines } from './event-stream-lines.ts';

/**
 * The receipt comment that ends a response (docs/receipts.md): `: receipt <JWS>`, then, on a sealed exchange whose
 * receipt is in the transparency log, `: log-index <N>` (docs/log.md), then the blank line. SSE parsers skip both
 * comment lines. The one reader and writer of that comment, for the server, the verifier and `sigil connect`.
 */
export interface ReceiptComment {
  /** The compact JWS of the message receipt. */
  receipt: string;
  /** Its leaf index in the transparency log, when the comment names one. */
  logIndex?: number;
  /** The comment ended with its blank line. */
  blankLine: boolean;
  /** Every line of it ended with LF alone (what Sigil writes). */
  lfOnly: boolean;
}

/** The comment as Sigil writes it. */
export function writeReceiptComment(jws: string, logIndex?: number): string {
  return logIndex === undefined ? `: receipt ${jws}\n\n` : `: receipt ${jws}\n: log-index ${logIndex}\n\n`;
}

/** What starts the comment's first line. */
export const RECEIPT_COMMENT_MARKER = new TextEncoder().encode(': receipt ');

const COLON = 0x3a;
/** Any engine line Sigil must not relay: only Sigil writes receipts (`:receipt`, `: receipt`, alone or with a value). */
const RECEIPT_LIKE = /^: ?receipt(?:[ \t]|$)/;
const decoder = new TextDecoder('latin1');
const RECEIPT_LINE = /^: receipt ([A-Za-z0-9_-]+\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*)$/;
const LOG_INDEX_LINE = /^: log-index (0|[1-9]\d{0,15})$/;

/** Whether the line `bytes[start, end)` is a receipt comment of any spelling (what the relay drops from an engine). */
export function isReceiptCommentLine(bytes: Uint8Array, start: number, end: number): boolean {
  return bytes[start] === COLON && RECEIPT_LIKE.test(decoder.decode(bytes.subarray(start, Math.min(end, start + 16))));
}

/**
 * Reads the receipt comment that is all of `bytes` (from its `: receipt ` marker to the end); undefined when they hold
 * anything else (another line, a second comment, a JWS with other characters, a leaf index that is not a number).
 */
export function readReceiptComment(bytes: Uint8Array): ReceiptComment | undefined {
  const lines = new EventStreamLines(bytes.length);
  lines.push(bytes);
  const texts: string[] = [];
  let lfOnly = true;
  let blankLine = false;
  const take = () => {
    if (blankLine) return false;
    if (lines.eolEnd - lines.end !== 1 || lines.bytes[lines.end] !== 0x0a) lfOnly = false;
    if (lines.end === lines.start) blankLine = true;
    else texts.push(decoder.decode(lines.bytes.subarray(lines.start, lines.end)));
    return true;
  };
  while (lines.nextLine()) if (!take()) return undefined;
  // Each line of the comment ends with a line end.
  if (lines.lastLine()) return undefined;
  const first = RECEIPT_LINE.exec(texts[0] ?? '');
  if (first === null || texts.length > 2) return undefined;
  const comment: ReceiptComment = { receipt: first[1]!, blankLine, lfOnly };
  if (texts.length === 2) {
    const index = LOG_INDEX_LINE.exec(texts[1]!);
    if (index === null) return undefined;
    if (Number.isSafeInteger(Number(index[1]))) comment.logIndex = Number(index[1]);
  }
  return comment;
}
