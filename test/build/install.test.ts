import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
  it('compiles without node-llama-cpp, and the built CLI says the engine is not installed', () => {
    const app = mkdtempSync(join(tmpdir(), 'sigil-proxy-only-'));
    for (const entry of ['src', 'scripts', 'bin', 'package.json', 'tsconfig.json', 'tsconfig.build.json', 'tsconfig.proxy-only.json']) {
      cpSync(join(ROOT, entry), join(app, entry), { recursive: true });
    }
    mkdirSync(join(app, 'node_modules'));
    for (const entry of readdirSync(join(ROOT, 'node_modules'))) {
      if (entry === 'node-llama-cpp' || entry === '@node-llama-cpp') continue;
      symlinkSync(join(ROOT, 'node_modules', entry), join(app, 'node_modules', entry));
    }
    const build = spawnSync(process.execPath, ['scripts/compile.mjs'], { cwd: app, encoding: 'utf8' });
    expect(build.stdout).toBe('');
    expect(build.stderr).toBe('build: node-llama-cpp is not installed: building the proxy without the built-in engine\n');
    expect(build.status).toBe(0);
    expect(existsSync(join(app, 'dist/cli/main.js'))).toBe(true);
    const engine = spawnSync(process.execPath, ['bin/sigil.js', 'engine', '--model', 'x.gguf'], { cwd: app, encoding: 'utf8' });
    expect(engine.status).toBe(1);
    expect(engine.stderr).toContain('the built-in engine is not installed (node-llama-cpp, an optional dependency)');
  }, 240_000);
});
