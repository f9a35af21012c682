import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CHECKS } from '../../src/verify/check-registry.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const TEXT = /\.(ts|mjs|js|md|ya?ml|html|css|json)$/;

function files(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && TEXT.test(e.name))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)));
}

const SOURCES = [...files('src'), ...files('docs'), 'README.md'];

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

function anchors(doc: string): Set<string> {
  if (!existsSync(join(ROOT, doc))) return new Set();
  const text = readFileSync(join(ROOT, doc), 'utf8').replace(/```[\s\S]*?```/g, '');
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug(m[1]!)));
}

describe('docs/ is what a reader of the repository has: code and pages cite its sections', () => {
  it('no file in src/ or docs/ cites "SPEC n" or "issue n", documents the repository does not hold', () => {
    const citations = SOURCES.flatMap((file) =>
      readFileSync(join(ROOT, file), 'utf8')
        .split('\n')
        .flatMap((line, i) => (/\bSPEC\s*§?\s*\d|\b[Ii]ssues?\s+#?\d/.test(line) ? [`${file}:${i + 1}: ${line.trim()}`] : [])),
    );
    expect(citations).toEqual([]);
  });

  it('every docs/NAME.md#anchor cited in src/ or docs/ names a heading of that page', () => {
    const cache = new Map<string, Set<string>>();
    const broken: string[] = [];
    for (const file of SOURCES) {
      const text = readFileSync(join(ROOT, file), 'utf8');
      const inDocs = file.startsWith('docs/');
      const cited = [...text.matchAll(/\bdocs\/([a-z0-9-]+\.md)#([a-z0-9-]+)/g)].map((m) => [`docs/${m[1]}`, m[2]!] as const);
      if (inDocs) cited.push(...[...text.matchAll(/\]\(([a-z0-9-]+\.md)#([a-z0-9-]+)\)/g)].map((m) => [`docs/${m[1]}`, m[2]!] as const));
      for (const [doc, anchor] of cited) {
        if (!cache.has(doc)) cache.set(doc, anchors(doc));
        if (!cache.get(doc)!.has(anchor)) broken.push(`${file}: ${doc}#${anchor}`);
      }
    }
    expect(broken).toEqual([]);
  });
});

describe('docs/auditing.md says once which check stops which attack', () => {
  it('its table names exactly the checks of the registry (src/verify/check-registry.ts), each with the attack it stops', () => {
    const page = readFileSync(join(ROOT, 'docs/auditing.md'), 'utf8');
    const section = page.slice(page.indexOf('### Which check stops which attack'));
    const table = section.slice(0, section.indexOf('\n\n', section.indexOf('| check | stops |')));
    const rows = [...table.matchAll(/^\| `([^`]+)` \| (.+) \|$/gm)].map((m) => ({ name: m[1]!, stops: m[2]!.trim() }));
    expect(rows.map((r) => r.name).sort()).toEqual(CHECKS.map((c) => c.name).sort());
    for (const row of rows) expect(row.stops.length).toBeGreaterThan(20);
  });
});
