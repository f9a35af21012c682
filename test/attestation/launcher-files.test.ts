import { execFileSync, spawn } from 'node:child_process';
import { constants, copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

/**
 * Issue 46, item 5: the launcher (bin/sigil.js) runs only the bytes it hashed. Each test builds a small artifact (the
 * real launcher, a main.mjs that imports ./chunk.mjs and prints what it exports) and plants one thing in it.
 */
const LAUNCHER = join(import.meta.dirname, '../../bin/sigil.js');
const MAIN = "import { word } from './chunk.mjs';\nexport async function main() {\n  process.stdout.write(word);\n  return 0;\n}\n";
const chunk = (word: string) => `export const word = ${JSON.stringify(word)};\n`;
const dirs: string[] = [];

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function artifact(): { root: string; outside: string } {
  const root = mkdtempSync(join(tmpdir(), 'sigil-launcher-'));
  const outside = mkdtempSync(join(tmpdir(), 'sigil-outside-'));
  dirs.push(root, outside);
  mkdirSync(join(root, 'bin'));
  mkdirSync(join(root, 'dist/sigil'), { recursive: true });
  copyFileSync(LAUNCHER, join(root, 'bin/sigil.js'));
  writeFileSync(join(root, 'dist/sigil/main.mjs'), MAIN);
  return { root, outside };
}

/** Runs the artifact's launcher to its end: exit code, stdout and stderr. */
function launch(root: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(root, 'bin/sigil.js')], { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const refusal = (why: string) => `sigil: ${why}: refusing to run unmeasured code.\n`;

describe('the launcher runs only the bytes it hashed', () => {
  it('runs a bundle of regular files', async () => {
    const { root } = artifact();
    writeFileSync(join(root, 'dist/sigil/chunk.mjs'), chunk('genuine'));
    expect(await launch(root)).toEqual({ code: 0, stdout: 'genuine', stderr: '' });
  });

  it('refuses a bundle file that is a link, even to a genuine file', async () => {
    const { root, outside } = artifact();
    writeFileSync(join(outside, 'chunk.mjs'), chunk('genuine'));
    symlinkSync(join(outside, 'chunk.mjs'), join(root, 'dist/sigil/chunk.mjs'));
    expect(await launch(root)).toEqual({
      code: 1,
      stdout: '',
      stderr: refusal('dist/sigil/chunk.mjs is a link (Node would load what it points to, not the bytes measured)'),
    });
  });

  it('refuses a bundle file that is a FIFO, without waiting on it', async () => {
    const { root } = artifact();
    execFileSync('mkfifo', [join(root, 'dist/sigil/chunk.mjs')]);
    expect(await launch(root)).toEqual({ code: 1, stdout: '', stderr: refusal('dist/sigil/chunk.mjs is a FIFO, not a regular file') });
  });

  const canMakeDevices = (() => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-mknod-'));
    try {
      execFileSync('mknod', [join(dir, 'null'), 'c', '1', '3'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  })();

  it.skipIf(!canMakeDevices)('refuses a bundle file that is a device', async () => {
    const { root } = artifact();
    execFileSync('mknod', [join(root, 'dist/sigil/chunk.mjs'), 'c', '1', '3']);
    expect(await launch(root)).toEqual({ code: 1, stdout: '', stderr: refusal('dist/sigil/chunk.mjs is a device, not a regular file') });
  });

  it('refuses a bundle folder that resolves outside the artifact', async () => {
    const { root, outside } = artifact();
    writeFileSync(join(outside, 'main.mjs'), MAIN);
    writeFileSync(join(outside, 'chunk.mjs'), chunk('genuine'));
    rmSync(join(root, 'dist/sigil'), { recursive: true });
    symlinkSync(outside, join(root, 'dist/sigil'));
    const run = await launch(root);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^sigil: dist\/sigil resolves outside the artifact \(.+\): refusing to run unmeasured code\.\n$/);
  });

  it('refuses an engine file that is a FIFO', async () => {
    const { root } = artifact();
    writeFileSync(join(root, 'dist/sigil/chunk.mjs'), chunk('genuine'));
    mkdirSync(join(root, 'engine/node_modules/llama'), { recursive: true });
    execFileSync('mkfifo', [join(root, 'engine/node_modules/llama/index.js')]);
    expect(await launch(root)).toEqual({
      code: 1,
      stdout: '',
      stderr: refusal('engine/node_modules/llama/index.js is a FIFO, neither a file, a folder nor a link inside engine/'),
    });
  });

  it('never evaluates planted bytes: a link to a FIFO that serves genuine bytes to the hash and planted ones after', async () => {
    const { root, outside } = artifact();
    const fifo = join(outside, 'chunk.mjs');
    execFileSync('mkfifo', [fifo]);
    symlinkSync(fifo, join(root, 'dist/sigil/chunk.mjs'));
    let served = 0;
    let stop = false;
    // The attacker's side: each reader that opens the FIFO gets the next answer, genuine first.
    const serving = (async () => {
      for (const word of ['genuine', 'PLANTED']) {
        const writer = await open(fifo, constants.O_WRONLY);
        if (stop) return void (await writer.close());
        await writer.write(chunk(word));
        await writer.close();
        served += 1;
      }
    })();
    const run = await launch(root);
    stop = true;
    // Unblock a writer still waiting for a reader, so the test ends.
    const reader = await open(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    await serving.catch(() => undefined);
    await reader.close();
    expect(run.stdout).not.toContain('PLANTED');
    expect(run).toEqual({
      code: 1,
      stdout: '',
      stderr: refusal('dist/sigil/chunk.mjs is a link (Node would load what it points to, not the bytes measured)'),
    });
    expect(served).toBe(0);
  });
});
