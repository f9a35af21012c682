import { describe, expect, it } from 'vitest';
import { EMAIL_GBNF, integerRange, KNOWN_EMAIL_PATTERNS } from '../../packages/engine/src/server/grammar-leaves.ts';

/** The GBNF of a leaf as a JavaScript regular expression (leaves use only literals, classes, groups, | and {m,n}). */
function asRegExp(gbnf: string): RegExp {
  const source = gbnf
    .replace(/"((?:[^"\\]|\\.)*)"/g, (_m, text: string) => text.replace(/\\(.)/g, '$1').replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .replace(/ /g, '');
  return new RegExp(`^(?:${source})$`);
}

describe('integer ranges', () => {
  it.each([
    [0, 130],
    [1, 7],
    [-15, 9],
    [-250, -3],
    [7, 7],
    [95, 1203],
    [-1, 0],
  ])('from %d to %d: every integer in range and none outside, without leading zeros', (min, max) => {
    const re = asRegExp(integerRange(min, max));
    for (let n = min - 300; n <= max + 300; n++) expect(re.test(String(n)), String(n)).toBe(n >= min && n <= max);
    expect(re.test('007')).toBe(false);
    expect(re.test('-0')).toBe(false);
  });

  it('the safe-integer bounds zod writes for .int() take the extremes and refuse one past them', () => {
    const re = asRegExp(integerRange(Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER));
    for (const n of ['0', '42', '-42', String(Number.MAX_SAFE_INTEGER), String(Number.MIN_SAFE_INTEGER)]) expect(re.test(n), n).toBe(true);
    for (const n of ['9007199254740992', '-9007199254740992', '1e5', '+1']) expect(re.test(n), n).toBe(false);
  });
});

describe('email', () => {
  it('every address the grammar writes matches the email patterns it stands for', () => {
    const re = asRegExp(EMAIL_GBNF);
    const samples = ['"a@b.co"', '"ab.cd@x.yz.io"', '"z9@q1.abcdef"'];
    for (const sample of samples) {
      expect(re.test(sample), sample).toBe(true);
      for (const pattern of KNOWN_EMAIL_PATTERNS) expect(new RegExp(pattern).test(sample.slice(1, -1)), `${sample} ~ ${pattern}`).toBe(true);
    }
    for (const bad of ['"@b.co"', '"a..b@c.de"', '"a@b"', '".a@b.co"']) expect(re.test(bad), bad).toBe(false);
  });
});
