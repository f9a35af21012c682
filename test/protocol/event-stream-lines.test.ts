import { describe, expect, it } from 'vitest';
import { EventStreamLines } from '../../src/protocol/event-stream-lines.ts';

const encode = (text: string) => new TextEncoder().encode(text);

/** Every line read from `chunks`, as [text, line end], the last one without a line end marked so. */
function linesOf(chunks: string[], maxEventBytes = 1024): { lines: [string, string][]; overflow: boolean } {
  const reader = new EventStreamLines(maxEventBytes);
  const lines: [string, string][] = [];
  const decode = (from: number, to: number) => new TextDecoder().decode(reader.bytes.subarray(from, to));
  for (const chunk of chunks) {
    reader.push(encode(chunk));
    while (reader.nextLine()) lines.push([reader.text(), decode(reader.end, reader.eolEnd)]);
    if (reader.overflow) return { lines, overflow: true };
  }
  if (reader.lastLine()) lines.push([reader.text(), '(none)']);
  return { lines, overflow: false };
}

describe('EventStreamLines', () => {
  it('ends lines at LF, CRLF and a bare CR alike, and keeps each line end', () => {
    expect(linesOf(['data: a\ndata: b\r\ndata: c\r\r']).lines).toEqual([
      ['data: a', '\n'],
      ['data: b', '\r\n'],
      ['data: c', '\r'],
      ['', '\r'],
    ]);
  });

  it('reads a CRLF split across two chunks as one line end, not a blank line', () => {
    const reader = new EventStreamLines(1024);
    reader.push(encode('data: a\r'));
    expect(reader.nextLine()).toBe(true);
    expect(reader.nextLine()).toBe(false);
    expect(reader.push(encode('\ndata: b\n'))).toBe(1);
    expect(reader.nextLine()).toBe(true);
    expect(reader.text()).toBe('data: b');
  });

  it('joins a line split across chunks, with its line end, into one array of its own', () => {
    const reader = new EventStreamLines(1024);
    reader.push(encode('data: he'));
    expect(reader.nextLine()).toBe(false);
    reader.push(encode('llo\r\nnext'));
    expect(reader.nextLine()).toBe(true);
    expect([reader.joined, reader.start, reader.text(), reader.eolEnd - reader.end]).toEqual([true, 0, 'data: hello', 2]);
    expect(reader.nextLine()).toBe(false);
    expect(reader.lastLine()).toBe(true);
    expect([reader.text(), reader.eolEnd === reader.end]).toEqual(['next', true]);
    expect(reader.lastLine()).toBe(false);
  });

  it('counts an event with its line ends up to the cap, and starts again after its blank line', () => {
    // 'data: 12345678\n' is 15 bytes: two make an event of 30.
    expect(linesOf(['data: 12345678\ndata: 12345678\n\ndata: 12345678\ndata: 12345678\n\n'], 30).overflow).toBe(false);
    expect(linesOf(['data: 12345678\ndata: 12345678\n\ndata: 12345678\ndata: 123456789\n\n'], 30)).toEqual({
      lines: [
        ['data: 12345678', '\n'],
        ['data: 12345678', '\n'],
        ['', '\n'],
        ['data: 12345678', '\n'],
      ],
      overflow: true,
    });
  });

  it('refuses an event that never ends at the cap, not when the stream ends: nothing past the cap is held', () => {
    const reader = new EventStreamLines(100);
    reader.push(encode('data: '.padEnd(60, 'x')));
    expect([reader.nextLine(), reader.overflow]).toEqual([false, false]);
    reader.push(encode('x'.repeat(41)));
    expect([reader.nextLine(), reader.overflow]).toEqual([false, true]);
    reader.push(encode('\n\n'));
    expect(reader.nextLine()).toBe(false);
  });
});
