import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catalogueEntry } from '../support/sigil.ts';

const ROOT = join(import.meta.dirname, '../..');
const work = mkdtempSync(join(tmpdir(), 'sigil-measure-self-'));

/** A fresh clone of the committed tree in its own folder, built as the README says (`npm run build`), sharing the installed packages. */
function cloneAndBuild(name: string): string {
  const dir = join(work, name);
  execFileSync('bash', ['-c', `mkdir -p "${dir}" && git -C "${ROOT}" archive HEAD | tar -x -C "${dir}"`]);
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  execFileSync('npm', ['run', 'build'], { cwd: dir, stdio: 'ignore', env: { PATH: process.env.PATH! } });
  return dir;
}

/** Moves the times of every file under `dir` an hour back, as an earlier build would have left them: file times differ, the digest must not. */
function backdate(dir: string): void {
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    const { atimeMs, mtimeMs } = statSync(path);
    utimesSync(path, (atimeMs - 3_600_000) / 1000, (mtimeMs - 3_600_000) / 1000);
  }
}

/** `sigil measure self` in a clean environment (no NODE_OPTIONS, as Sigil is started), from the given build. */
const measure = (build: string, ...args: string[]) =>
  execFileSync(process.execPath, [join(build, 'bin/sigil.js'), 'measure', 'self', '--config', join(work, 'sigil.yaml'), ...args], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH! },
    maxBuffer: 64 * 1024 * 1024,
  }); // --files lists every installed file: megabytes

let first: string;
let second: string;

beforeAll(async () => {
  writeFileSync(join(work, 'models.yaml'), stringify({ models: [catalogueEntry({ id: 'm' }, 0)] }));
  writeFileSync(
    join(work, 'sigil.yaml'),
    stringify({ upstreams: { e: { url: 'http://127.0.0.1:9' } }, catalogue: 'models.yaml', auth: { keys_file: 'api-keys' } }),
  );
  first = cloneAndBuild('first');
  backdate(join(first, 'dist'));
  second = cloneAndBuild('second');
}, 600_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('sigil measure self', () => {
  it('gives the same manifest and digest from two builds in different folders at different times', () => {
    const a = measure(first);
    const b = measure(second);
    expect(a).toMatch(/^\{"catalogue_sha256":"[0-9a-f]{64}","code":\{"root":"artifact","sha256":"[0-9a-f]{64}"\},"config_sha256":/);
    expect(a).toContain('"node_modules":null');
    expect(a).not.toContain(first); // the config, catalogue and keys file live outside both clones
    expect(b).not.toContain(second);
    expect(a).toMatch(/\nmanifest_sha384 [0-9a-f]{96}\n$/);
    expect(b).toBe(a);
  }, 300_000);

  it('--files lists the artifact as sha256sum does, and a changed bundle changes the digest', () => {
    const listed = measure(first, '--files');
    const sums = execFileSync('bash', ['-c', 'LC_ALL=C sha256sum bin/sigil.js dist/addons/* dist/sigil/*'], { cwd: first, encoding: 'utf8' });
    expect(sums).toContain('  dist/sigil/main.mjs\n');
    expect(listed.startsWith(`# artifact (code.sha256 = SHA-256 of these lines)\n${sums}{`)).toBe(true);
    const before = measure(first).split('\n').at(-2);
    writeFileSync(join(second, 'dist/sigil/main.mjs'), '// changed\n', { flag: 'a' });
    expect(measure(second).split('\n').at(-2)).not.toBe(before);
  }, 300_000);
});
