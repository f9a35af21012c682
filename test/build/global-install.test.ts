import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../support/wait-for.ts';

const ROOT = join(import.meta.dirname, '../..');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const run = promisify(execFile);
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/** node-llama-cpp's GPU builds (CUDA and Vulkan, hundreds of MB); the built-in engine runs on the CPU. */
const GPU_BUILD = /^@node-llama-cpp\/(linux|win)-x64-(cuda|cuda-ext|vulkan)$/;

/** Every installed package below a node_modules folder, by name, with the files at its top. */
function installedPackages(nodeModules: string): Array<{ name: string; files: string[] }> {
  const found: Array<{ name: string; files: string[] }> = [];
  const visit = (folder: string, name: string) => {
    const files = readdirSync(folder);
    found.push({ name, files: files.filter((f) => f !== 'node_modules').sort() });
    if (files.includes('node_modules')) walk(join(folder, 'node_modules'));
  };
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir)) {
      if (entry.startsWith('.')) continue;
      if (entry.startsWith('@')) for (const inner of readdirSync(join(dir, entry))) visit(join(dir, entry, inner), `${entry}/${inner}`);
      else visit(join(dir, entry), entry);
    }
  };
  walk(nodeModules);
  return found;
}

/**
 * The server as a package: `npm pack` at the root (its prepack builds dist/ when a source changed), then
 * `npm install -g` of that tarball into a fresh prefix from the local npm cache, as a user without a clone would.
 */
describe('sigil installed from its npm pack tarball', () => {
  it('gives a working sigil without node-llama-cpp’s GPU builds: --version, serve --help, and a start with the built-in engine that answers /readyz', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-global-'));
    await run(npm, ['pack', '--pack-destination', dir], { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 });
    const prefix = join(dir, 'prefix');
    await run(npm, ['install', '-g', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', join(dir, `sigil-${VERSION}.tgz`)], {
      cwd: dir,
      maxBuffer: 64 * 1024 * 1024,
    });
    const gpuBuilds = installedPackages(join(prefix, 'lib/node_modules/sigil/node_modules')).filter((p) => GPU_BUILD.test(p.name));
    // Each GPU build is the package's own empty placeholder (package.json alone), bundled in the tarball; none came from the registry.
    expect(gpuBuilds.map((p) => p.files)).toEqual(gpuBuilds.map(() => ['package.json']));
    const sigil = join(prefix, 'bin/sigil');
    expect((await run(sigil, ['--version'])).stdout).toBe(`${VERSION}\n`);
    expect((await run(sigil, ['serve', '--help'])).stdout).toMatch(/^usage: sigil serve \[options\]\n/);

    const work = join(dir, 'work');
    await run('mkdir', ['-p', work]);
    writeFileSync(
      join(work, 'sigil.yaml'),
      stringify({ auth: { keys_file: 'api-keys' }, attestation: { provider: 'none' }, engine: { threads: 1, parallel: 1, context_size: 1024 } }),
    );
    const child = spawn(sigil, ['serve', '--config', join(work, 'sigil.yaml'), '--port', '0'], { cwd: work, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      const url = await waitFor(
        'Sigil is ready',
        () => {
          if (child.exitCode !== null) throw new Error(`sigil exited ${child.exitCode}: ${stderr}`);
          return /Sigil is ready at (http:\/\/127\.0\.0\.1:\d+) /.exec(stderr)?.[1];
        },
        { timeoutMs: 180_000 },
      );
      const ready = await fetch(`${url}/readyz`);
      expect(ready.status).toBe(200);
    } finally {
      child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    }
  }, 900_000);
});
