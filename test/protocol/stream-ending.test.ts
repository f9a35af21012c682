import { describe, expect, it } from 'vitest';
import { endsWhereStreamEnds, isFinalEventLine, streamEndingOf } from '../../src/protocol/stream-ending.ts';

const bytes = (text: string) => new TextEncoder().encode(text);

describe('the stream ending rule', () => {
  it('names the ending of each endpoint', () => {
    expect(['/v1/chat/completions', '/v1/completions', '/v1/responses', '/v1/responses/?x=1'].map(streamEndingOf)).toEqual(['done', 'done', 'event', 'event']);
  });

  it('a [DONE]-ended body ends with data: [DONE] as a whole line and its blank line, any line ends', () => {
    expect(endsWhereStreamEnds(bytes('data: {}\n\ndata: [DONE]\n\n'), 'done')).toBe(true);
    expect(endsWhereStreamEnds(bytes('data: {}\r\rdata:[DONE]\r\n\r\n'), 'done')).toBe(true);
    expect(endsWhereStreamEnds(bytes('data: [DONE]\n\n'), 'done')).toBe(true);
    expect(endsWhereStreamEnds(bytes('data: {}\n\ndata: [DONE]\n'), 'done')).toBe(false);
    expect(endsWhereStreamEnds(bytes(`data: ${'x'.repeat(100)}data: [DONE]\n\n`), 'done')).toBe(false);
  });

  it('an event-ended body ends at the end of an event', () => {
    expect(endsWhereStreamEnds(bytes('event: response.completed\ndata: {}\n\n'), 'event')).toBe(true);
    expect(endsWhereStreamEnds(bytes('event: response.completed\ndata: {}\n'), 'event')).toBe(false);
  });

  it('tells the lines that end a stream for an app, whatever its kind', () => {
    const final = ['data: [DONE]', 'data:[DONE]', 'event: response.completed', 'event: response.failed', 'event: response.incomplete'];
    const notFinal = ['data: {"done":true}', 'event: response.output_text.delta', ': [DONE]', 'data: [DONE] more'];
    expect(final.map(isFinalEventLine)).toEqual(final.map(() => true));
    expect(notFinal.map(isFinalEventLine)).toEqual(notFinal.map(() => false));
  });
});
