import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');

function markdownFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' || entry.name === 'dist' ? [] : markdownFiles(path);
    return entry.name.endsWith('.md') ? [path] : [];
  });
}

/** A shell line that runs `sigil` as if it were on the PATH: after `npm install` in a clone it is not (npm links no bin for the root package). */
const BARE = /(^\s*|[|;&]\s*|\$\(\s*)sigil [a-z]/;

it('every command in a code block of the README and docs is one a user can run: ./bin/sigil.js from a clone, npx sigil-connect after the package install', () => {
  const bare: string[] = [];
  for (const file of ['README.md', ...markdownFiles('docs'), ...markdownFiles('src'), ...markdownFiles('packages')]) {
    // Only blocks a user would paste into a shell: no language, sh, bash, shell or console (not `text` output, not code).
    let shell: boolean | undefined;
    let continued = false;
    readFileSync(join(ROOT, file), 'utf8')
      .split('\n')
      .forEach((line, i) => {
        // A comment is not a command, and a line that continues the one before (`\` at its end) holds its arguments.
        const code = line.replace(/(^|\s)#.*$/, '');
        const argumentsOnly = continued;
        continued = /\\\s*$/.test(code);
        if (line.startsWith('```')) shell = shell === undefined ? /^```(sh|bash|shell|console)?\s*$/.test(line) : undefined;
        else if (shell === true && !argumentsOnly && BARE.test(code) && !/^\s*cli\s/.test(code)) bare.push(`${file}:${i + 1}: ${line.trim()}`);
      });
  }
  expect(bare).toEqual([]);
});
