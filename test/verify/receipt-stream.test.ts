import { describe, expect, it } from 'vitest';
import { isVerifyError } from '../../src/verify/errors.ts';
import { splitReceiptStream } from '../../src/verify/stream-receipt.ts';

const JWS = 'eyJhbGciOiJFUzI1NiJ9.eyJhIjoxfQ.c2ln';
const EVENTS = 'data: {"id":"c1","choices":[{"index":0,"delta":{"content":": receipt x"}}]}\n\ndata: [DONE]\n\n';

function codeOf(text: string): string {
  try {
    splitReceiptStream(Buffer.from(text));
    return 'ok';
  } catch (err) {
    return isVerifyError(err) ? err.code : String(err);
  }
}

describe('splitReceiptStream', () => {
  it('cuts after data: [DONE]\\n\\n: the body is what response_hash covers, the comment holds the receipt', () => {
    const split = splitReceiptStream(Buffer.from(`${EVENTS}: receipt ${JWS}\n\n`));
    expect(Buffer.from(split.body).toString()).toBe(EVENTS);
    expect(split.receipt).toBe(JWS);
  });

  it('keeps CRLF line endings of the engine inside the hashed body', () => {
    const events = 'data: {"id":"c1"}\r\n\r\ndata: [DONE]\r\n\r\n';
    const split = splitReceiptStream(Buffer.from(`${events}: receipt ${JWS}\n\n`));
    expect(Buffer.from(split.body).toString()).toBe(events);
  });

  it('takes [DONE] only as a whole line: "xdata: [DONE]" inside a comment does not end a stream (issue 11)', () => {
    expect(codeOf(`data: {"id":"c1"}\n\n: not really xdata: [DONE]\n\n: receipt ${JWS}\n\n`)).toBe('ERR_VERIFY_STREAM');
    expect(codeOf(`data: {"id":"c1"}\n\n${'y'.repeat(80)}xdata: [DONE]\n\n: receipt ${JWS}\n\n`)).toBe('ERR_VERIFY_STREAM');
    expect(codeOf(`data: [DONE]\n\n: receipt ${JWS}\n\n`)).toBe('ok');
  });

  it('refuses a stream without the comment, with a comment not after [DONE], or with bytes after the comment', () => {
    expect(codeOf(EVENTS)).toBe('ERR_VERIFY_STREAM');
    expect(codeOf(`data: {"id":"c1"}\n\n: receipt ${JWS}\n\n`)).toBe('ERR_VERIFY_STREAM');
    expect(codeOf(`${EVENTS}: receipt ${JWS}\n\ndata: {"id":"c2"}\n\n`)).toBe('ERR_VERIFY_STREAM');
    expect(codeOf(`${EVENTS}: receipt not a jws\n\n`)).toBe('ERR_VERIFY_STREAM');
  });
});
