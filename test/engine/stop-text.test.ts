import { describe, expect, it } from 'vitest';
import { StopTextFilter } from '../../packages/engine/src/server/stop-text.ts';

describe('StopTextFilter', () => {
  it('holds back a tail that may begin a stop sequence and releases it when it does not', () => {
    const filter = new StopTextFilter(['END']);
    expect(filter.push('abc E')).toBe('abc ');
    expect(filter.push('N')).toBe('');
    expect(filter.push('x')).toBe('ENx');
    expect(filter.stopped).toBe(false);
  });

  it('cuts before a stop sequence split across pieces and sends nothing after it', () => {
    const filter = new StopTextFilter(['\n\n', 'END']);
    expect(filter.push('one E')).toBe('one ');
    expect(filter.push('ND two')).toBe('');
    expect(filter.stopped).toBe(true);
    expect(filter.push('three')).toBe('');
  });

  it('cuts at the earliest of several stop sequences', () => {
    const filter = new StopTextFilter(['b', 'a']);
    expect(filter.push('xxaxb')).toBe('xx');
  });

  it('passes everything through without stop sequences, and flushes what it held', () => {
    const none = new StopTextFilter([]);
    expect(none.push('a')).toBe('a');
    const held = new StopTextFilter(['STOP']);
    expect(held.push('ST')).toBe('');
    expect(held.flush()).toBe('ST');
  });
});
