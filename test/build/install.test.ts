import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');
const read = (file: string) => JSON.parse(readFileSync(join(ROOT, file), 'utf8'));

interface Manifest {
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  allowScripts?: Record<string, boolean>;
}

describe('npm install on a fresh clone', () => {
  it('finds the lock file up to date with package.json, so it does not rewrite it', () => {
    const manifest = read('package.json') as Manifest;
    const locked = (read('package-lock.json') as { packages: Record<string, Manifest> }).packages[''];
    expect(locked?.dependencies).toEqual(manifest.dependencies);
    expect(locked?.devDependencies).toEqual(manifest.devDependencies);
    expect(locked?.optionalDependencies).toEqual(manifest.optionalDependencies);
  });

  it('has a decision in allowScripts for every locked package with an install script, so npm warns of none', () => {
    const manifest = read('package.json') as Manifest;
    const lock = read('package-lock.json') as { packages: Record<string, { hasInstallScript?: boolean }> };
    const withScripts = Object.entries(lock.packages)
      .filter(([, p]) => p.hasInstallScript === true)
      .map(([path]) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length));
    expect(withScripts.length).toBeGreaterThan(0);
    expect([...new Set(withScripts)].filter((name) => manifest.allowScripts?.[name] === undefined)).toEqual([]);
  });
});

describe('a proxy-only source build (npm install --omit=optional && npm run build)', () => {
  it('runs as the README writes it in a fresh copy of the tree: a real install without optional packages, then the whole build', () => {
    const app = mkdtempSync(join(tmpdir(), 'sigil-proxy-only-'));
    const tracked = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' });
    expect(tracked.status).toBe(0);
    for (const file of tracked.stdout.split('\0').filter((f) => f !== '' && existsSync(join(ROOT, f)))) {
      mkdirSync(dirname(join(app, file)), { recursive: true });
      cpSync(join(ROOT, file), join(app, file));
    }
    // The npm cache the machine already has keeps this from downloading what it holds.
    const install = spawnSync('npm', ['install', '--omit=optional', '--prefer-offline', '--no-audit', '--no-fund'], { cwd: app, encoding: 'utf8' });
    expect({ status: install.status, stderr: install.stderr }).toEqual({ status: 0, stderr: expect.not.stringMatching(/ERR!/) });
    expect(existsSync(join(app, 'node_modules/node-llama-cpp'))).toBe(false);
    const build = spawnSync('npm', ['run', 'build'], { cwd: app, encoding: 'utf8' });
    expect({ status: build.status, stderr: build.stderr }).toEqual({
      status: 0,
      stderr:
        'build: node-llama-cpp is not installed: building the proxy without the built-in engine\n' +
        // Once for the bundle of the artifact, once for the trust page.
        "build: esbuild's native binary is not installed (an optional dependency): using esbuild-wasm\n" +
        `build: @koromix/koffi-${process.platform}-${process.arch} is not installed (an optional dependency): the artifact has no koffi addon, so no GPU evidence\n` +
        "build: esbuild's native binary is not installed (an optional dependency): using esbuild-wasm\n",
    });
    expect(existsSync(join(app, 'dist/cli/main.js'))).toBe(true);
    expect(existsSync(join(app, 'dist/sigil/main.mjs'))).toBe(true);
    expect(existsSync(join(app, 'dist/trust-page/trust/app.js'))).toBe(true);
    const engine = spawnSync(process.execPath, ['bin/sigil.js', 'engine', '--model', 'x.gguf'], { cwd: app, encoding: 'utf8' });
    expect(engine.status).toBe(1);
    expect(engine.stderr).toContain('the built-in engine is not installed (node-llama-cpp, an optional dependency)');
    rmSync(app, { recursive: true, force: true });
  }, 480_000);
});
