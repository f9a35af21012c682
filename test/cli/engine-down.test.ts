import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { addKey } from '../../src/auth/keys-file.ts';
import { runSigilCli, SIGIL_FROM_SOURCES } from '../support/cli.ts';
import { freePort } from '../support/free-port.ts';
import { catalogueEntry } from '../support/sigil.ts';
import { startTestEngine } from '../support/test-engine.ts';
import { waitFor } from '../support/wait-for.ts';

describe('sigil serve with its engine down at start', () => {
  it('names the engine, its URL and the cause at start, in /readyz and in the request log; says ready once the engine answers', async () => {
    const enginePort = await freePort();
    const engineUrl = `http://127.0.0.1:${enginePort}/v1`;
    const dir = mkdtempSync(join(tmpdir(), 'sigil-engine-down-'));
    writeFileSync(join(dir, 'models.yaml'), stringify({ models: [catalogueEntry({ id: 'm' }, 0)] }));
    writeFileSync(
      join(dir, 'sigil.yaml'),
      stringify({
        workers: 1,
        listen: { host: '127.0.0.1', port: 0 },
        upstreams: { local: { url: engineUrl, health_check_interval_ms: 200 } },
        catalogue: 'models.yaml',
        auth: { keys_file: 'keys' },
      }),
    );
    const { key } = addKey(join(dir, 'keys'));
    const child = spawn(process.execPath, [...SIGIL_FROM_SOURCES, 'serve', '--config', join(dir, 'sigil.yaml')], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    let engine: Awaited<ReturnType<typeof startTestEngine>> | undefined;
    try {
      const url = await waitFor('the first line', () => /Sigil is listening at (http:\/\/127\.0\.0\.1:\d+); /.exec(stderr)?.[1], { timeoutMs: 60_000 });
      const cause = 'connection refused (ECONNREFUSED)';
      expect(stderr).toBe(`Sigil is listening at ${url}; waiting for engine \`local\` at ${engineUrl}: ${cause}\n`);
      expect(stdout).toContain(`"msg":"engine \`local\` not reachable at ${engineUrl}: ${cause}; its model list is not checked"`);

      const notReady = await fetch(`${url}/readyz`);
      expect(notReady.status).toBe(503);
      expect(((await notReady.json()) as { error: { message: string } }).error.message).toBe(
        `Not ready: waiting for engine \`local\` at ${engineUrl}: ${cause}.`,
      );

      const chat = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'a private prompt' }] }),
      });
      expect(chat.status).toBe(502);
      const line = await waitFor('the request log line', () =>
        stdout
          .split('\n')
          .filter((l) => l.includes('"msg":"request"'))
          .map((l) => JSON.parse(l) as Record<string, unknown>)
          .find((l) => l.route === '/v1/chat/completions'),
      );
      expect([line.upstream, line.upstream_errno, line.error_code]).toEqual(['local', 'ECONNREFUSED', 'upstream_unreachable']);
      expect(stdout).not.toContain('a private prompt');
      expect(stderr).not.toContain('Sigil is ready');

      engine = await startTestEngine({ modelNames: ['m'], port: enginePort });
      await waitFor('the ready line', () => stderr.includes(`Sigil is ready at ${url} - open it for the trust page\n`));
      const ready = await fetch(`${url}/readyz`);
      expect([ready.status, await ready.text()]).toEqual([200, '{"status":"ready","keys_loaded":true,"engines":{"local":true}}']);
    } finally {
      child.kill('SIGTERM');
      await exited;
      await engine?.close();
    }
  }, 120_000);
});

describe('sigil config check --probe', () => {
  const configFor = (engineUrl: string) => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-probe-'));
    writeFileSync(join(dir, 'models.yaml'), stringify({ models: [catalogueEntry({ id: 'm' }, 0), catalogueEntry({ id: 'other' }, 1)] }));
    writeFileSync(join(dir, 'sigil.yaml'), stringify({ upstreams: { local: { url: engineUrl } }, catalogue: 'models.yaml', auth: { keys_file: 'keys' } }));
    addKey(join(dir, 'keys'));
    return join(dir, 'sigil.yaml');
  };

  it('names an engine that does not answer, with its URL and the cause, and exits 1', async () => {
    const engineUrl = `http://127.0.0.1:${await freePort()}/v1`;
    const result = await runSigilCli('config', 'check', '--probe', '--config', configFor(engineUrl));
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(`sigil config check: upstreams.local: not reachable at ${engineUrl}: connection refused (ECONNREFUSED)\n`);
  }, 60_000);

  it('names a catalogue model the engine does not list; without --probe, the engine is not contacted', async () => {
    const engine = await startTestEngine({ modelNames: ['m'] });
    try {
      const config = configFor(engine.baseUrl);
      const probed = await runSigilCli('config', 'check', '--probe', '--config', config);
      expect(probed.code).toBe(1);
      expect(probed.stderr).toBe('sigil config check: upstreams.local: does not list other (catalogue model other); it lists m\n');
      const asked = engine.requests.length;
      const unprobed = await runSigilCli('config', 'check', '--config', config);
      expect(unprobed.code).toBe(0);
      expect(engine.requests.length).toBe(asked);
    } finally {
      await engine.close();
    }
  }, 60_000);
});
