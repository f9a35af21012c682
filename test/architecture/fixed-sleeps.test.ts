import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
/** The most fixed sleeps test/** may hold (docs/architecture.md, "Tests wait for events"). */
const MOST_SLEEPS = 10;
const MARKER = '// real clock:';
/** The helper that holds the one poll interval of every wait, and this file, whose examples are the rule's. */
const EXEMPT = new Set(['test/support/wait-for.ts', 'test/architecture/fixed-sleeps.test.ts']);

/**
 * A fixed sleep is a timer whose callback only resolves a promise: `setTimeout(r, ms)`, `setTimeout(() => resolve(), ms)`,
 * or node:timers/promises. A timer that rejects (a deadline) or does work (a sender's drip) is not one.
 */
const SLEEP = /setTimeout\(\s*(?:[A-Za-z_$][\w$]*|\(\)\s*=>\s*[A-Za-z_$][\w$]*\(\))\s*[,)]|from 'node:timers\/promises'/;

export interface FixedSleep {
  line: number;
  text: string;
  /** The line before says why the real clock is the subject. */
  marked: boolean;
}

export function fixedSleeps(source: string): FixedSleep[] {
  const lines = source.split('\n');
  return lines.flatMap((text, i) => (SLEEP.test(text) ? [{ line: i + 1, text: text.trim(), marked: (lines[i - 1] ?? '').trim().startsWith(MARKER) }] : []));
}

function testSources(): string[] {
  return readdirSync(join(ROOT, 'test'), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)))
    .filter((path) => !EXEMPT.has(path))
    .sort();
}

describe('fixed sleeps in the tests', () => {
  it('are found as the rule says: a timer that only resolves, not a deadline nor a drip', () => {
    const source = [
      'await new Promise((r) => setTimeout(r, 20));',
      `${MARKER} the flood's rate is the subject`,
      'await new Promise((resolve) => setTimeout(resolve, 1000));',
      'await new Promise<void>((done) => setTimeout(() => done(), 5));',
      "import { setTimeout as sleep } from 'node:timers/promises';",
      "const timer = setTimeout(() => reject(new Error('late')), 20_000);",
      "const drip = setInterval(() => socket.write(' '), 1000);",
    ].join('\n');
    expect(fixedSleeps(source)).toEqual([
      { line: 1, text: 'await new Promise((r) => setTimeout(r, 20));', marked: false },
      { line: 3, text: 'await new Promise((resolve) => setTimeout(resolve, 1000));', marked: true },
      { line: 4, text: 'await new Promise<void>((done) => setTimeout(() => done(), 5));', marked: false },
      { line: 5, text: "import { setTimeout as sleep } from 'node:timers/promises';", marked: false },
    ]);
  });

  it(`number at most ${MOST_SLEEPS} in test/**, each with a "${MARKER}" comment on the line before saying why`, () => {
    const found = testSources().flatMap((path) => fixedSleeps(readFileSync(join(ROOT, path), 'utf8')).map((s) => ({ path, ...s })));
    expect(found.filter((s) => !s.marked).map((s) => `${s.path}:${s.line}: ${s.text}`)).toEqual([]);
    expect(found.length, found.map((s) => `${s.path}:${s.line}`).join('\n')).toBeLessThanOrEqual(MOST_SLEEPS);
  });
});
