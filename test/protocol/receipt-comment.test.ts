import { describe, expect, it } from 'vitest';
import { isReceiptCommentLine, readReceiptComment, writeReceiptComment } from '../../src/protocol/receipt-comment.ts';

const JWS = 'eyJhbGciOiJFUzI1NiJ9.eyJhIjoxfQ.c2lnbmF0dXJl';
const read = (text: string) => readReceiptComment(new TextEncoder().encode(text));

describe('the receipt comment', () => {
  it('reads what it writes: the receipt, and the leaf index when there is one', () => {
    expect(read(writeReceiptComment(JWS))).toEqual({ receipt: JWS, blankLine: true, lfOnly: true });
    expect(read(writeReceiptComment(JWS, 42))).toEqual({ receipt: JWS, logIndex: 42, blankLine: true, lfOnly: true });
    expect(writeReceiptComment(JWS, 7)).toBe(`: receipt ${JWS}\n: log-index 7\n\n`);
  });

  it('reads CR and CRLF line ends and a missing blank line, and says so', () => {
    expect(read(`: receipt ${JWS}\r\n: log-index 0\r\r`)).toEqual({ receipt: JWS, logIndex: 0, blankLine: true, lfOnly: false });
    expect(read(`: receipt ${JWS}\n`)).toEqual({ receipt: JWS, blankLine: false, lfOnly: true });
  });

  it('refuses anything else: a line after it, a second comment, a line without its end, a bad JWS or index', () => {
    for (const text of [
      `: receipt ${JWS}\n\ndata: more\n`,
      `: receipt ${JWS}\n: receipt ${JWS}\n\n`,
      `: receipt ${JWS}`,
      `: receipt ${JWS}\n: log-index 7`,
      `: receipt ${JWS}+\n\n`,
      `: receipt ${JWS}\n: log-index 07\n\n`,
      `: receipt ${JWS}\n: log-index -1\n\n`,
      `: receipt ${JWS}\n: note 1\n\n`,
    ]) {
      expect(read(text), JSON.stringify(text)).toBeUndefined();
    }
  });

  it('knows an engine receipt comment of any spelling as one (the relay drops them), and nothing else', () => {
    const line = (text: string) => isReceiptCommentLine(new TextEncoder().encode(text), 0, text.length);
    expect([': receipt x', ':receipt x', ': receipt', ':receipt\tx'].map(line)).toEqual([true, true, true, true]);
    expect([': receipts', ': keep-alive', 'data: receipt', ': log-index 1'].map(line)).toEqual([false, false, false, false]);
  });
});
