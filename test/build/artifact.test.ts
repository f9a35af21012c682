import { execFileSync, fork, spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addKey } from '../../src/auth/keys-file.ts';
import { buildTree } from '../support/built-tree.ts';
import { catalogueEntry } from '../support/sigil.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';

/**
 * Code planted beside a built Sigil, as an operator with a shell could plant it, and what a served Sigil and
 * `sigil measure self` make of it: the planted code never runs, or the digest names what ran.
 */
const ROOT = join(import.meta.dirname, '../..');
const work = mkdtempSync(join(tmpdir(), 'sigil-artifact-'));
const children: ChildProcess[] = [];
let engine: TestEngine;
let tree: string;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  writeFileSync(join(work, 'models.yaml'), stringify({ models: [catalogueEntry({ id: 'm' }, 0)] }));
  writeFileSync(
    join(work, 'sigil.yaml'),
    stringify({ listen: { host: '127.0.0.1', port: 0 }, upstreams: { e: { url: engine.baseUrl } }, catalogue: 'models.yaml', auth: { keys_file: 'keys' } }),
  );
  tree = buildTree(work, 'built');
}, 600_000);

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await engine.close();
  rmSync(work, { recursive: true, force: true });
});

const measure = (dir: string) =>
  execFileSync(process.execPath, [join(dir, 'bin/sigil.js'), 'measure', 'self', '--config', join(work, 'sigil.yaml')], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH! },
  });
const digestOf = (printed: string) => /\nmanifest_sha384 ([0-9a-f]{96})\n$/.exec(printed)?.[1];

/** Serves the built tree, sends one chat completion, and returns what the client got. */
async function serveOnce(dir: string): Promise<{ status: number; content: string | undefined }> {
  const { key } = addKey(join(work, 'keys'));
  const child = spawn(process.execPath, [join(dir, 'bin/sigil.js'), 'serve', '--config', join(work, 'sigil.yaml')], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { PATH: process.env.PATH! },
  });
  children.push(child);
  try {
    const url = await new Promise<string>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`sigil exited with ${code}`)));
      createInterface({ input: child.stdout! }).on('line', (line) => {
        const entry = JSON.parse(line) as { msg?: string; url?: string };
        if (entry.msg === 'sigil listening') resolve(entry.url!);
      });
    });
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'MY SECRET PROMPT 42' }] }),
    });
    const body = (await res.json()) as { choices?: Array<{ message: { content: string } }> };
    return { status: res.status, content: body.choices?.[0]?.message.content };
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => (child.exitCode !== null ? resolve(undefined) : child.once('exit', resolve)));
  }
}

/** CommonJS that records that it ran, then stands in for the genuine package. */
const plant = (marker: string, genuine: string) =>
  `require('node:fs').writeFileSync(${JSON.stringify(marker)}, 'planted code ran');\nmodule.exports = require(${JSON.stringify(genuine)});\n`;

describe('code planted beside the built Sigil', () => {
  it('a dist/node_modules/undici never runs: Sigil relays the prompt with the undici it was built with', async () => {
    const marker = join(work, 'undici-ran');
    const planted = join(tree, 'dist/node_modules/undici');
    mkdirSync(planted, { recursive: true });
    writeFileSync(join(planted, 'package.json'), JSON.stringify({ name: 'undici', version: '7.30.2', main: 'index.js' }));
    writeFileSync(join(planted, 'index.js'), plant(marker, join(ROOT, 'node_modules/undici/index.js')));
    try {
      const served = await serveOnce(tree);
      expect(served).toEqual({ status: 200, content: engine.reply });
      expect(existsSync(marker)).toBe(false);
    } finally {
      rmSync(join(tree, 'dist/node_modules'), { recursive: true, force: true });
    }
  }, 120_000);

  it('a node_modules nested under a production package (@hpke/core/node_modules/@hpke/common) never runs', async () => {
    const marker = join(work, 'hpke-common-ran');
    const nested = join(tree, 'node_modules/@hpke/core/node_modules/@hpke/common');
    cpSync(join(ROOT, 'node_modules/@hpke/common'), nested, { recursive: true, dereference: true });
    // Both of the package's entry points record that they ran, then go on as the genuine module.
    writeFileSync(join(nested, 'script/mod.js'), plant(marker, join(ROOT, 'node_modules/@hpke/common/script/mod.js')));
    writeFileSync(
      join(nested, 'esm/mod.js'),
      `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(marker)}, 'planted code ran');\nexport * from ${JSON.stringify(join(ROOT, 'node_modules/@hpke/common/esm/mod.js'))};\n`,
    );
    try {
      const served = await serveOnce(tree);
      expect(served).toEqual({ status: 200, content: engine.reply });
      expect(existsSync(marker)).toBe(false);
    } finally {
      rmSync(join(tree, 'node_modules/@hpke/core/node_modules'), { recursive: true, force: true });
    }
  }, 120_000);

  it('a changed entry point (bin/sigil.js) changes the manifest digest', () => {
    const before = digestOf(measure(tree));
    const launcher = readFileSync(join(tree, 'bin/sigil.js'));
    appendFileSync(join(tree, 'bin/sigil.js'), '// changed\n');
    try {
      const after = digestOf(measure(tree));
      expect(before).toMatch(/^[0-9a-f]{96}$/);
      expect(after).toMatch(/^[0-9a-f]{96}$/);
      expect(after).not.toBe(before);
    } finally {
      writeFileSync(join(tree, 'bin/sigil.js'), launcher);
    }
  }, 120_000);

  it('a bundle that writes its genuine bytes back when it runs is measured as what ran, not as what it left on disk', () => {
    const bundle = join(tree, 'dist/sigil/main.mjs');
    const genuine = readFileSync(bundle);
    const saved = join(work, 'genuine.mjs');
    writeFileSync(saved, genuine);
    const genuineDigest = digestOf(measure(tree));
    const marker = join(work, 'restorer-ran');
    writeFileSync(
      bundle,
      Buffer.concat([
        Buffer.from(
          `import { readFileSync as __r, writeFileSync as __w } from 'node:fs';\n__w(new URL(import.meta.url), __r(${JSON.stringify(saved)}));\n__w(${JSON.stringify(marker)}, 'ran');\n`,
        ),
        genuine,
      ]),
    );
    try {
      const ranModified = digestOf(measure(tree));
      expect(existsSync(marker)).toBe(true);
      expect(readFileSync(bundle).equals(genuine)).toBe(true); // it covered its tracks
      expect(ranModified).toMatch(/^[0-9a-f]{96}$/);
      expect(ranModified).not.toBe(genuineDigest);
      expect(digestOf(measure(tree))).toBe(genuineDigest);
    } finally {
      writeFileSync(bundle, genuine);
    }
  }, 120_000);

  it('a worker or engine process refuses to run when the artifact differs from the one its parent measured', async () => {
    const child = (parentDigest: string) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        // fork() gives the child a channel to its parent, as cluster workers and the engine's process have.
        const run = fork(join(tree, 'bin/sigil.js'), ['--version'], { env: { PATH: process.env.PATH!, SIGIL_ARTIFACT_SHA256: parentDigest }, silent: true });
        let stdout = '';
        let stderr = '';
        run.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
        run.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
        run.on('exit', (code) => resolve({ code, stdout, stderr }));
      });
    const listing = execFileSync('bash', ['-c', 'LC_ALL=C sha256sum bin/sigil.js dist/addons/* dist/sigil/*'], { cwd: tree });
    const measured = createHash('sha256').update(listing).digest('hex');
    expect(await child(measured)).toEqual({ code: 0, stdout: `${JSON.parse(readFileSync(join(tree, 'package.json'), 'utf8')).version}\n`, stderr: '' });
    expect(await child('0'.repeat(64))).toEqual({
      code: 1,
      stdout: '',
      stderr: 'sigil: the artifact on disk changed since the parent process measured it: refusing to run it.\n',
    });
  }, 60_000);
});
