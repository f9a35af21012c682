import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync, statSync, symlinkSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BUILD_INPUTS } from '../../scripts/build-inputs.mjs';

const ROOT = join(import.meta.dirname, '../..');
const app = mkdtempSync(join(tmpdir(), 'sigil-prestart-'));
afterAll(() => rmSync(app, { recursive: true, force: true }));

/** `npm start`'s prestart step in a copy of the tree. */
const prestart = () => spawnSync(process.execPath, ['scripts/build-if-stale.mjs'], { cwd: app, encoding: 'utf8' });

describe("npm start's prestart", () => {
  it('builds when nothing was built, skips the build when nothing changed, and builds again after a source changes', () => {
    for (const entry of BUILD_INPUTS) {
      cpSync(join(ROOT, entry), join(app, entry), { recursive: true });
    }
    symlinkSync(join(ROOT, 'node_modules'), join(app, 'node_modules'));

    const first = prestart();
    expect(first.status).toBe(0);
    expect(first.stderr).toMatch(/^build: compiling the sources and the trust page into dist\/ \(about half a minute on 2 cores\)\.\.\.\n/);
    expect(first.stderr).toMatch(/build: done in \d+\.\d s\n$/);
    expect(existsSync(join(app, 'dist/cli/main.js'))).toBe(true);
    const built = statSync(join(app, 'dist/cli/main.js')).mtimeMs;

    const second = prestart();
    expect(second).toMatchObject({ status: 0, stderr: 'build: dist/ is up to date with the sources, not rebuilding\n' });
    expect(statSync(join(app, 'dist/cli/main.js')).mtimeMs).toBe(built);

    const later = new Date(Date.now() + 5_000);
    utimesSync(join(app, 'src/cli/serve.ts'), later, later);
    const third = prestart();
    expect(third.status).toBe(0);
    expect(third.stderr).toContain('build: compiling');

    // The built-in engine is bundled too: a change to its package is a change to the sources.
    const evenLater = new Date(Date.now() + 10_000);
    utimesSync(join(app, 'packages/engine/src/server/messages.ts'), evenLater, evenLater);
    const fourth = prestart();
    expect(fourth.status).toBe(0);
    expect(fourth.stderr).toContain('build: compiling');
  }, 400_000);
});
