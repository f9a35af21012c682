import { spawn, spawnSync } from 'node:child_process';
import { lstatSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killChild } from '../support/kill-child.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/**
 * The client as a package of its own (docs/connect.md, "Install"): `npm pack` in packages/client builds and packs it, and a
 * fresh project installs the tarball from the npm registry's dependencies, as a user would.
 */
const ROOT = join(import.meta.dirname, '../..');
const project = mkdtempSync(join(tmpdir(), 'sigil-client-install-'));
const MAX_INSTALLED_BYTES = 15_000_000;
let engine: TestEngine;
let sigil: TestSigil;

/** Bytes of every file under `dir` (symlinks counted as links), as `du -sb` counts them. */
function bytesUnder(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    total += entry.isDirectory() ? bytesUnder(path) : lstatSync(path).size;
  }
  return total;
}

beforeAll(async () => {
  const pack = spawnSync('npm', ['pack', '--pack-destination', project], { cwd: join(ROOT, 'packages/client'), encoding: 'utf8' });
  if (pack.status !== 0) throw new Error(`npm pack failed: ${pack.stderr}`);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'an-app', version: '1.0.0', type: 'module', private: true }));
  const install = spawnSync('npm', ['install', '--no-audit', '--no-fund', './sigil-client-0.1.0.tgz'], { cwd: project, encoding: 'utf8' });
  if (install.status !== 0) throw new Error(`npm install failed: ${install.stderr}`);
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
}, 240_000);

afterAll(async () => {
  await sigil?.close(0);
  await engine?.close();
  rmSync(project, { recursive: true, force: true });
});

describe('@sigil/client installed from its packed tarball', () => {
  it('installs at most 15 MB, without the proxy, the engine or dev tools', () => {
    const modules = readdirSync(join(project, 'node_modules'));
    for (const absent of ['node-llama-cpp', 'typescript', 'vitest', 'pino', 'ioredis', 'commander', '@sigstore/tuf']) expect(modules).not.toContain(absent);
    expect(bytesUnder(join(project, 'node_modules'))).toBeLessThanOrEqual(MAX_INSTALLED_BYTES);
  });

  it('runs npx sigil-connect --help', () => {
    const help = spawnSync('npx', ['--no-install', 'sigil-connect', '--help'], { cwd: project, encoding: 'utf8' });
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^usage: sigil connect \[options\] <URL>\n/);
  });

  it('imports the attested client and the verifier', () => {
    const script =
      "const c = await import('@sigil/client'); const v = await import('@sigil/client/verify'); console.log(typeof c.createAttestedFetch, typeof v.verifyService, typeof v.verifyReceipt);";
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: project, encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('function function function\n');
  });

  it('type-checks a TypeScript program that uses it, from the declarations it ships', () => {
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          typeRoots: [join(ROOT, 'node_modules/@types')],
          types: ['node'],
        },
        files: ['app.ts'],
      }),
    );
    writeFileSync(
      join(project, 'app.ts'),
      [
        "import { createAttestedFetch, type AttestedFetch } from '@sigil/client';",
        "import { verifyReceipt, type Check } from '@sigil/client/verify';",
        "import { startConnect } from '@sigil/client/connect';",
        "const attested: AttestedFetch = await createAttestedFetch({ baseURL: 'https://inference.example.com/v1' });",
        'const checks: Check[] = attested.attestation.checks;',
        "const receipt = await verifyReceipt('a.b.c', { jwks: { keys: [] } });",
        "const connect = await startConnect({ service: 'https://inference.example.com', listen: { host: '127.0.0.1', port: 0 } });",
        'console.log(checks.length, receipt.checks.length, connect.url);',
        '// @ts-expect-error: the option is a string',
        'void createAttestedFetch({ baseURL: 1 });',
        '',
      ].join('\n'),
    );
    const check = spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', project], { cwd: project, encoding: 'utf8' });
    expect(check.stdout).toBe('');
    expect(check.status).toBe(0);
  });

  it('runs sigil-connect against a real Sigil: an app gets a completion whose receipt verified', async () => {
    const child = spawn(join(project, 'node_modules/.bin/sigil-connect'), [sigil.url, '--allow-insecure-http', '--allow-no-tee', '--listen', '127.0.0.1:0'], {
      cwd: project,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      let out = '';
      const url = await new Promise<string>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          const match = /point your client at (http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(out);
          if (match !== null) resolve(match[1]!);
        });
        child.once('exit', (code) => reject(new Error(`sigil-connect exited ${code}: ${out}`)));
      });
      const answer = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'from the package' }] }),
      });
      expect(answer.status).toBe(200);
      expect(((await answer.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]?.message.content).toBe(engine.reply);
      const status = (await (await fetch(`${url}/status`)).json()) as { receipts: { verified: number; failed: number } };
      expect(status.receipts).toMatchObject({ verified: 1, failed: 0 });
    } finally {
      await killChild(child);
    }
  });
});
