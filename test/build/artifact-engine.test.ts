import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { addKey } from '../../src/auth/keys-file.ts';
import { buildTree, copyArtifact } from '../support/built-tree.ts';
import { catalogueEntry } from '../support/sigil.ts';

/**
 * The built-in engine inside the measured artifact (docs/attestation.md, "What is measured"): its packages installed
 * from image/engine's lock into engine/ beside dist/, as the image installs them, with no node_modules anywhere above
 * the bundle. The engine runs from there, and its files are part of the artifact's digest.
 */
const ROOT = join(import.meta.dirname, '../..');
const work = mkdtempSync(join(tmpdir(), 'sigil-artifact-engine-'));
const children: ChildProcess[] = [];
let app: string;

const env = () => ({ PATH: process.env.PATH! });
/** `sigil measure self` with a config that names a catalogue (the built-in engine's own is made at start). */
const measure = (dir: string) =>
  /\nmanifest_sha384 ([0-9a-f]{96})\n$/.exec(
    execFileSync(process.execPath, [join(dir, 'bin/sigil.js'), 'measure', 'self', '--config', join(work, 'measured.yaml')], {
      encoding: 'utf8',
      cwd: dir,
      env: env(),
    }),
  )?.[1];

beforeAll(() => {
  const tree = buildTree(work, 'built');
  app = join(work, 'app');
  mkdirSync(join(app, 'engine'), { recursive: true });
  copyArtifact(tree, app);
  writeFileSync(join(work, 'models.yaml'), stringify({ models: [catalogueEntry({ id: 'm' }, 0)] }));
  writeFileSync(
    join(work, 'measured.yaml'),
    stringify({ upstreams: { e: { url: 'http://127.0.0.1:9/v1' } }, catalogue: 'models.yaml', auth: { keys_file: 'keys' } }),
  );
  for (const file of ['package.json', 'package-lock.json']) cpSync(join(ROOT, 'image/engine', file), join(app, 'engine', file));
  // npm with the machine's environment (its registry settings and certificates); Sigil itself runs with PATH only.
  execFileSync('npm', ['install', '--ignore-scripts', '--no-audit', '--no-fund', '--no-update-notifier'], {
    cwd: join(app, 'engine'),
    stdio: 'ignore',
  });
}, 900_000);

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
});

describe('the built-in engine beside the artifact', () => {
  it('serves a chat from engine/node_modules, with no node_modules above the bundle', async () => {
    const { key } = addKey(join(app, '.sigil/api-keys'));
    const child = spawn(process.execPath, [join(app, 'bin/sigil.js'), 'serve', '--config', join(app, 'config/sigil.yaml')], {
      cwd: app,
      stdio: ['ignore', 'pipe', 'inherit'],
      env: env(),
    });
    children.push(child);
    const url = await new Promise<string>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`sigil exited with ${code}`)));
      createInterface({ input: child.stdout! }).on('line', (line) => {
        if (!line.startsWith('{')) return;
        const entry = JSON.parse(line) as { msg?: string; url?: string };
        if (entry.msg === 'sigil listening') resolve(entry.url!);
      });
    });
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'demo-tiny-random', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { object: string; choices: { message: { role: string } }[] };
    expect(body.object).toBe('chat.completion');
    expect(body.choices[0]!.message.role).toBe('assistant');
    child.kill('SIGTERM');
  }, 600_000);

  it('measures the engine packages: one changed byte in them changes the digest', () => {
    const before = measure(app);
    expect(before).toMatch(/^[0-9a-f]{96}$/);
    const file = join(app, 'engine/node_modules/node-llama-cpp/package.json');
    appendFileSync(file, ' ');
    try {
      expect(measure(app)).not.toBe(before);
    } finally {
      execFileSync('truncate', ['-s', '-1', file]);
    }
    expect(measure(app)).toBe(before);
  }, 300_000);

  it('refuses to run when a link in engine/ leads outside it', () => {
    const outside = join(work, 'outside');
    mkdirSync(outside, { recursive: true });
    writeFileSync(join(outside, 'index.js'), 'module.exports = 1;\n');
    const link = join(app, 'engine/node_modules/planted');
    symlinkSync(outside, link);
    try {
      let stderr = '';
      try {
        execFileSync(process.execPath, [join(app, 'bin/sigil.js'), '--help'], { encoding: 'utf8', stdio: 'pipe', env: env() });
      } catch (err) {
        stderr = (err as { stderr: string }).stderr;
      }
      expect(stderr).toContain('engine/node_modules/planted links outside engine/');
    } finally {
      rmSync(link);
    }
  }, 120_000);
});
