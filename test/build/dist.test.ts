import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { createInterface } from 'node:readline';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addKey } from '../../src/auth/keys-file.ts';
import { catalogueEntry } from '../support/sigil.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';

const ROOT = join(import.meta.dirname, '../..');
const PACKAGE = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  optionalDependencies: Record<string, string>;
};

/**
 * A proxy-only install, made the way `npm run build` makes dist/: package.json, bin/sigil.js, the compiled
 * dist/ with its bundle dist/sigil/, and a node_modules: the project's own packages, linked one by one, less
 * node-llama-cpp and its builds (`--omit=optional`), for the library's exports.
 */
let app: string;
const children: ChildProcess[] = [];
let engine: TestEngine | undefined;

beforeAll(() => {
  app = mkdtempSync(join(tmpdir(), 'sigil-dist-'));
  const dist = join(app, 'dist');
  execFileSync(process.execPath, [join(ROOT, 'scripts/compile.mjs'), dist]);
  execFileSync(process.execPath, [join(ROOT, 'scripts/copy-assets.mjs'), dist]);
  mkdirSync(join(app, 'bin'));
  cpSync(join(ROOT, 'bin/sigil.js'), join(app, 'bin/sigil.js'));
  cpSync(join(ROOT, 'package.json'), join(app, 'package.json'));
  mkdirSync(join(app, 'node_modules'));
  for (const entry of readdirSync(join(ROOT, 'node_modules'))) {
    if (entry === 'node-llama-cpp' || entry === '@node-llama-cpp') continue;
    symlinkSync(join(ROOT, 'node_modules', entry), join(app, 'node_modules', entry));
  }
}, 120_000);

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await engine?.close();
});

function compiledFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.js'))
    .map((entry) => join(entry.parentPath, entry.name));
}

/** The package an import specifier names: `@scope/name` or `name`; undefined for relative paths and Node's own modules. */
function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith('.') || specifier.startsWith('/') || isBuiltin(specifier)) return undefined;
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

// Static imports and re-exports at the start of a statement, side-effect imports and dynamic import(): not the word
// "from" inside a message such as 'differ from' : '...'.
const IMPORT = /^\s*(?:import|export)\b[^'";]*?\bfrom\s*["']([^"']+)["']|^\s*import\s*["']([^"']+)["']|\bimport\s*\(\s*["']([^"']+)["']/gm;

describe('the compiled proxy (dist/) needs only its production dependencies', () => {
  it('imports nothing but Node built-ins, `dependencies` and the built-in engine; node-llama-cpp, optional, only from the engine in the bundle', () => {
    const files = compiledFiles(join(app, 'dist'));
    expect(files.length).toBeGreaterThan(50);
    const outside: string[] = [];
    const seen = new Set<string>();
    for (const file of files) {
      const path = relative(join(app, 'dist'), file);
      for (const match of readFileSync(file, 'utf8').matchAll(IMPORT)) {
        const specifier = match[1] ?? match[2] ?? match[3];
        const name = packageOf(specifier!);
        if (name !== undefined) seen.add(name);
        // The built-in engine's workspace package: bundled into dist/sigil/, never installed on its own.
        if (name === undefined || name in PACKAGE.dependencies || name === '@sigil/engine') continue;
        outside.push(`${path} imports ${specifier}`);
      }
    }
    expect(outside).toEqual([]);
    expect(seen).toContain('undici');
    expect(seen).toContain('@sigil/engine');
    const bundled = readdirSync(join(app, 'dist/sigil')).filter((name) => name.endsWith('.mjs'));
    const loadingLlama = bundled.filter((name) =>
      /from\s*"node-llama-cpp"|import\(\s*"node-llama-cpp"\s*\)/.test(readFileSync(join(app, 'dist/sigil', name), 'utf8')),
    );
    expect(loadingLlama.length).toBeGreaterThan(0);
    expect(loadingLlama).not.toContain('main.mjs');
  });

  it('exports the attested client and the verifier as sigil/client and sigil/verify, compiled', () => {
    const script =
      "const c = await import('sigil/client'); const v = await import('sigil/verify'); console.log(typeof c.createAttestedFetch, typeof v.verifyReceipt)";
    const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: app, encoding: 'utf8', timeout: 20_000 });
    expect(result.stderr).toBe('');
    expect(result.stdout).toBe('function function\n');
  });

  it('keeps no .ts import specifier: every relative import was rewritten to .js', () => {
    const left = compiledFiles(join(app, 'dist')).filter((file) => /(?:from\s*|import\s*\(\s*)["']\.{1,2}\/[^"']*\.ts["']/.test(readFileSync(file, 'utf8')));
    expect(left).toEqual([]);
  });

  it('keeps every file of the bundle to Latin-1, so V8 holds each module source at one byte a character', () => {
    const bundle = join(app, 'dist', 'sigil');
    const wide = readdirSync(bundle)
      .filter((name) => name.endsWith('.mjs'))
      .flatMap((name) => {
        const text = readFileSync(join(bundle, name), 'utf8');
        const at = text.search(/[\u0100-\u{10ffff}]/u);
        return at === -1 ? [] : [`${name}: ${JSON.stringify(text.slice(Math.max(0, at - 30), at + 5))}`];
      });
    expect(wide).toEqual([]);
  });
});

describe('bin/sigil.js runs the bundle', () => {
  function sigil(args: string[]) {
    return spawnSync(process.execPath, [join(app, 'bin/sigil.js'), ...args], { encoding: 'utf8', timeout: 20_000 });
  }

  it('says the built-in engine is not installed when no upstream is configured and node-llama-cpp is absent', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-dist-noengine-'));
    writeFileSync(join(dir, 'sigil.yaml'), stringify({ listen: { host: '127.0.0.1', port: 0 }, auth: { keys_file: 'keys' } }));
    addKey(join(dir, 'keys'));
    const served = sigil(['serve', '--config', join(dir, 'sigil.yaml')]);
    expect(served.status).toBe(1);
    expect(served.stderr).toContain('the built-in engine is not installed (node-llama-cpp, an optional dependency)');
    const engineRun = sigil(['engine', '--model', join(dir, 'absent.gguf')]);
    expect(engineRun.status).toBe(1);
    expect(engineRun.stderr).toContain('sigil engine: the built-in engine is not installed');
  });

  it('prints the commands', () => {
    const result = sigil(['--help']);
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('usage: sigil <command>');
    expect(result.stdout).toContain('verify');
  });

  it('serves the catalogue and relays a chat completion with its receipt, without node-llama-cpp', async () => {
    engine = await startTestEngine({ modelNames: ['m'] });
    const dir = mkdtempSync(join(tmpdir(), 'sigil-dist-serve-'));
    writeFileSync(join(dir, 'models.yaml'), stringify({ models: [catalogueEntry({ id: 'm' }, 0)] }));
    writeFileSync(
      join(dir, 'sigil.yaml'),
      stringify({ listen: { host: '127.0.0.1', port: 0 }, upstreams: { e: { url: engine.baseUrl } }, catalogue: 'models.yaml', auth: { keys_file: 'keys' } }),
    );
    const { key } = addKey(join(dir, 'keys'));
    const child = spawn(process.execPath, [join(app, 'bin/sigil.js'), 'serve', '--config', join(dir, 'sigil.yaml')], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the compiled sigil did not start')), 20_000);
      child.once('exit', (code) => reject(new Error(`the compiled sigil exited with ${code}`)));
      createInterface({ input: child.stdout! }).on('line', (line) => {
        const entry = JSON.parse(line) as { msg?: string; url?: string };
        if (entry.msg !== 'sigil listening') return;
        clearTimeout(timer);
        resolve(entry.url!);
      });
    });

    const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: Array<{ id: string }> };
    expect(models.data.map((m) => m.id)).toEqual(['m']);

    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-service-receipt': 'true' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'Hi' }] }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
    expect(body.choices[0]!.message.content).toBe(engine.reply);
    expect(res.headers.get('x-service-receipt')).toMatch(/^eyJ[\w-]+\.[\w-]+\.[\w-]+$/);
  });
});
