import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../..');
const DEPCRUISE = join(ROOT, 'node_modules/.bin/depcruise');

/** The proxy's sources and the built-in engine's package, each cruised where the tree has it. */
const TREES = ['src', 'packages/engine/src'];

/** Runs dependency-cruiser with the project's rules over the trees `cwd` has; resolves with its exit code and report. */
async function cruise(cwd: string): Promise<{ code: number; report: string }> {
  const present = TREES.filter((path) => existsSync(join(cwd, path)));
  try {
    const { stdout } = await run(DEPCRUISE, [...present, '--config', join(ROOT, '.dependency-cruiser.cjs'), '--output-type', 'err'], { cwd });
    return { code: 0, report: stdout };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? 1, report: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

/** A throw-away tree in the repository's layout, with the given files. */
async function tree(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sigil-layers-'));
  for (const [path, text] of Object.entries(files)) {
    await mkdir(join(dir, path, '..'), { recursive: true });
    await writeFile(join(dir, path), text);
  }
  return dir;
}

describe('the layers (docs/architecture.md)', () => {
  it('hold in src and the engine package: nothing imports upward and there are no cycles', async () => {
    const { code, report } = await cruise(ROOT);
    expect(report).toContain('no dependency violations found');
    expect(code).toBe(0);
  });

  it.each([
    ['src/protocol/jcs.ts', "import '../http/server.ts';", 'src/http/server.ts', 'protocol-is-the-bottom'],
    ['src/verify/receipt.ts', "import type { X } from '../receipts/signer.ts';", 'src/receipts/signer.ts', 'verify-stands-alone'],
    ['src/proxy/upstream.ts', "import { sendError } from '../http/respond.ts';", 'src/http/respond.ts', 'lower-layers-do-not-import-http'],
    ['packages/engine/src/server/a.ts', "import '../../../../src/receipts/claims.ts';", 'src/receipts/claims.ts', 'engine-stands-alone'],
    ['packages/engine/src/a.ts', "import type { X } from '../../client/src/b.ts';", 'packages/client/src/b.ts', 'engine-stands-alone'],
    [
      'src/http/a.ts',
      "import '../../packages/engine/src/server/start-engine.ts';",
      'packages/engine/src/server/start-engine.ts',
      'proxy-runs-the-engine-package',
    ],
    ['src/http/a.ts', "import '../cli/main.ts';", 'src/cli/main.ts', 'only-cli-imports-cli'],
  ])('fail when %s imports upward (%s)', async (from, statement, to, rule) => {
    const dir = await tree({ [from]: `${statement}\nexport const a = 1;\n`, [to]: 'export type X = 1;\nexport const b = 2;\n' });
    try {
      const { code, report } = await cruise(dir);
      expect(code).not.toBe(0);
      expect(report).toContain(rule);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('fail on a cycle', async () => {
    const dir = await tree({ 'src/auth/a.ts': "import './b.ts';\nexport const a = 1;\n", 'src/auth/b.ts': "import './a.ts';\nexport const b = 1;\n" });
    try {
      const { code, report } = await cruise(dir);
      expect(code).not.toBe(0);
      expect(report).toContain('no-cycles');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
