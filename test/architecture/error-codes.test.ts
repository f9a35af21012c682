import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { HTTP_ERROR_CODES } from '../../src/protocol/errors.ts';

const ROOT = resolve(import.meta.dirname, '../..');

/**
 * Where a bare `throw new Error(` may stay, and exactly how many (docs/architecture.md#errors): none today. An entry
 * whose file no longer has that many is stale and fails too, so the list never outlives its reason. The built-in
 * engine is a separate program, outside src/.
 */
const BARE_THROWS_ALLOWED: Readonly<Record<string, number>> = {};

/** The two roots of every error Sigil throws: the client's OpenAI-shaped error and the coded error of everything else. */
const ERROR_ROOTS = new Set(['src/protocol/errors.ts:HttpError', 'src/protocol/sigil-error.ts:SigilError']);

const BARE_THROW = /throw new Error\(/g;
const BARE_CLASS = /class (\w+) extends Error\b/g;

function sources(): Array<{ path: string; text: string }> {
  return readdirSync(join(ROOT, 'src'), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)))
    .sort()
    .map((path) => ({ path, text: readFileSync(join(ROOT, path), 'utf8') }));
}

/** The ERR_ codes a file declares: a `...ErrorCode` union, a `SigilError<'ERR_...'>` family, an `..._ERROR_CODES` table. */
export function declaredCodes(source: string): string[] {
  const codes = new Set<string>();
  const literals = (text: string) => [...text.matchAll(/'(ERR_[A-Z0-9_]+)'/g)].map((m) => m[1]!);
  for (const m of source.matchAll(/type \w*ErrorCode\s*=([^;]+);/g)) literals(m[1]!).forEach((c) => codes.add(c));
  for (const m of source.matchAll(/extends SigilError<([^>]+)>/g)) literals(m[1]!).forEach((c) => codes.add(c));
  for (const m of source.matchAll(/_ERROR_CODES = \{([\s\S]*?)\} as const/g)) for (const key of m[1]!.matchAll(/^\s*(ERR_[A-Z0-9_]+):/gm)) codes.add(key[1]!);
  return [...codes];
}

function allDeclaredCodes(): Array<{ code: string; path: string }> {
  return sources().flatMap(({ path, text }) => declaredCodes(text).map((code) => ({ code, path })));
}

describe('error codes', () => {
  it('are found where a family declares them: a union, a one-code family, a table of codes', () => {
    const source = [
      "export type TsmErrorCode = 'ERR_TSM_ABSENT' | 'ERR_TSM_IO';",
      "export class UsageError extends SigilError<'ERR_USAGE'> {",
      "  constructor(message: string) { super('ERR_USAGE', message); }",
      '}',
      'export const TLOG_ERROR_CODES = {',
      "  ERR_TLOG_PROOF: 'an inclusion or consistency proof does not verify',",
      '} as const;',
      "if (err.code === 'ERR_NOT_DECLARED_HERE') return;",
    ].join('\n');
    expect(declaredCodes(source).sort()).toEqual(['ERR_TLOG_PROOF', 'ERR_TSM_ABSENT', 'ERR_TSM_IO', 'ERR_USAGE']);
  });

  it('are thrown instead of a bare Error everywhere in src/** but a short, explicit allow-list', () => {
    const over = sources().flatMap(({ path, text }) => {
      const found = text.match(BARE_THROW)?.length ?? 0;
      return found !== (BARE_THROWS_ALLOWED[path] ?? 0) ? [`${path}: ${found} bare throw new Error(...), ${BARE_THROWS_ALLOWED[path] ?? 0} allowed`] : [];
    });
    expect(over).toEqual([]);
  });

  it('are carried by every error class: each one is a SigilError (a stable code) or the HTTP catalogue error', () => {
    const uncoded = sources().flatMap(({ path, text }) =>
      [...text.matchAll(BARE_CLASS)].map((m) => `${path}:${m[1]}`).filter((name) => !ERROR_ROOTS.has(name)),
    );
    expect(uncoded).toEqual([]);
  });

  it('are each declared by one family only', () => {
    const byCode = new Map<string, string[]>();
    for (const { code, path } of allDeclaredCodes()) byCode.set(code, [...(byCode.get(code) ?? []), path]);
    expect([...byCode].filter(([, paths]) => paths.length > 1)).toEqual([]);
    expect(byCode.size).toBeGreaterThan(60);
  });

  it('are each documented in docs/errors.md, which names no code that does not exist', () => {
    const page = readFileSync(join(ROOT, 'docs/errors.md'), 'utf8');
    const declared = new Set(allDeclaredCodes().map((d) => d.code));
    expect([...declared].filter((code) => !page.includes(`\`${code}\``)).sort()).toEqual([]);
    const named = new Set([...page.matchAll(/`(ERR_[A-Z0-9_]+)`/g)].map((m) => m[1]!));
    expect([...named].filter((code) => !declared.has(code)).sort()).toEqual([]);
  });

  it('of the HTTP catalogue are each documented in the error table of docs/api.md', () => {
    const page = readFileSync(join(ROOT, 'docs/api.md'), 'utf8');
    const rows = page.split('\n').filter((line) => /^\| \d{3}/.test(line));
    expect(HTTP_ERROR_CODES.filter((code) => !rows.some((row) => row.includes(`\`${code}\``)))).toEqual([]);
    expect(new Set(HTTP_ERROR_CODES).size).toBe(HTTP_ERROR_CODES.length);
  });
});
