import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { stringify } from 'yaml';
import { afterEach, describe, expect, it } from 'vitest';
import { addKey } from '../../src/auth/keys-file.ts';
import { catalogueEntry } from '../support/sigil.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { waitFor } from '../support/wait-for.ts';
import { SIGIL_FROM_SOURCES } from '../support/cli.ts';

const running: Array<{ child: ChildProcess; engine: TestEngine }> = [];

afterEach(async () => {
  for (const { child, engine } of running.splice(0)) {
    child.kill('SIGKILL');
    await engine.close();
  }
});

/** `sigil serve` as its own process, as an operator runs it. */
async function serve(): Promise<{
  child: ChildProcess;
  url: string;
  dir: string;
  key: string;
  engine: TestEngine;
  exited: Promise<number | null>;
  logs: Array<{ msg?: string }>;
}> {
  const engine = await startTestEngine({ modelNames: ['m'] });
  const dir = mkdtempSync(join(tmpdir(), 'sigil-signals-'));
  writeFileSync(join(dir, 'models.yaml'), stringify({ models: [catalogueEntry({ id: 'm' }, 0)] }));
  writeFileSync(
    join(dir, 'sigil.yaml'),
    stringify({
      listen: { host: '127.0.0.1', port: 0 },
      upstreams: { e: { url: engine.baseUrl } },
      catalogue: 'models.yaml',
      auth: { keys_file: 'keys' },
      limits: { shutdown_grace_ms: 5000 },
      workers: 1,
    }),
  );
  const { key } = addKey(join(dir, 'keys'));
  const child = spawn(process.execPath, [...SIGIL_FROM_SOURCES, 'serve', '--config', join(dir, 'sigil.yaml')], { stdio: ['ignore', 'pipe', 'inherit'] });
  running.push({ child, engine });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const logs: Array<{ msg?: string }> = [];
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('sigil did not start')), 20_000);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const entry = JSON.parse(line) as { msg?: string; url?: string };
      logs.push(entry);
      if (entry.msg === 'sigil listening') {
        clearTimeout(timer);
        resolve(entry.url!);
      }
    });
  });
  return { child, url, dir, key, engine, exited, logs };
}

const chat = (url: string, key: string, stream = false) =>
  fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream }),
  });

describe('signals to sigil serve', () => {
  it('SIGHUP reloads the keys file at once', async () => {
    const sigil = await serve();
    const { key } = addKey(join(sigil.dir, 'keys'), 'late');
    expect((await chat(sigil.url, key)).status).toBe(401);
    sigil.child.kill('SIGHUP');
    await waitFor('the reload logged', () => sigil.logs.some((l) => l.msg === 'catalogue reloaded'));
    expect((await chat(sigil.url, key)).status).toBe(200);
  });

  it('SIGTERM lets an in-flight stream finish, then exits 0', async () => {
    const sigil = await serve();
    sigil.engine.behaviour = { chunkDelayMs: 50 };
    const res = await chat(sigil.url, sigil.key, true);
    const body = res.text();
    sigil.child.kill('SIGTERM');
    expect((await body).endsWith('data: [DONE]\n\n')).toBe(true);
    expect(await sigil.exited).toBe(0);
  });
});
