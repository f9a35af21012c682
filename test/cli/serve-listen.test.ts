import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SIGIL_FROM_SOURCES } from '../support/cli.ts';
import { freePort } from '../support/free-port.ts';
import { waitFor } from '../support/wait-for.ts';

const MODELS =
  'models: [{id: m, name: M, provider: p, created: 0, context_window: 8, reasoning: false, regions: [x], pricing: {input_per_mtok: 0, output_per_mtok: 0, currency: USD}, model_hash: "sha256:' +
  '0'.repeat(64) +
  '"}]\n';

/** A config in front of an engine that is not there (port 9), listening on `listen`, with a key file so no key is made. */
function configDir(listen: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'sigil-listen-'));
  writeFileSync(
    join(dir, 'sigil.yaml'),
    `workers: 1\nlisten: ${listen}\nauth: {keys_file: keys.txt}\nupstreams: {e: {url: "http://127.0.0.1:9/v1"}}\ncatalogue: models.yaml\n`,
  );
  writeFileSync(join(dir, 'models.yaml'), MODELS);
  writeFileSync(join(dir, 'keys.txt'), '');
  return dir;
}

function sigil(args: string[], env: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, [...SIGIL_FROM_SOURCES, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 30_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** Starts `sigil serve ARGS`, resolves with the URL of its "sigil listening" log line and a stop that sends `signal` and times the exit. */
async function serve(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [...SIGIL_FROM_SOURCES, 'serve', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = await waitFor(
    'sigil listening',
    () => {
      if (child.exitCode !== null) throw new Error(`sigil exited ${child.exitCode}: ${stderr}`);
      return /"url":"(http:\/\/[^"]+)","tls"/.exec(stdout)?.[1];
    },
    { timeoutMs: 60_000 },
  );
  const stop = async (signal: NodeJS.Signals) => {
    const started = Date.now();
    child.kill(signal);
    const code = await exited;
    return { code, ms: Date.now() - started, stdout, stderr };
  };
  return { url, stop, child };
}

describe('sigil serve --host and --port', () => {
  it('--help names both flags, their variables, and where the API keys live', () => {
    const result = sigil(['serve', '--help']);
    expect(result.code).toBe(0);
    const oneLine = result.stdout.replace(/\s+/g, ' ');
    expect(result.stdout).toMatch(/^usage: sigil serve \[options\]\n/);
    expect(oneLine).toContain(" --port <PORT> listen on PORT instead of the config's listen.port; 0: any free port (env: SIGIL_PORT) ");
    expect(oneLine).toContain(" --host <HOST> listen on HOST instead of the config's listen.host (env: SIGIL_HOST) ");
    expect(result.stdout).toContain('API keys: their hashes live in the file auth.keys_file names (config/sigil.yaml: .sigil/api-keys);\n');
  });

  it('--port overrides listen.port, and SIGIL_PORT gives way to it', async () => {
    const port = await freePort();
    const dir = configDir('{host: 127.0.0.1, port: 1}');
    const sigil = await serve(['--config', join(dir, 'sigil.yaml'), '--port', String(port)], { SIGIL_PORT: '2' });
    expect(sigil.url).toBe(`http://127.0.0.1:${port}`);
    expect((await fetch(`${sigil.url}/healthz`)).status).toBe(200);
    expect((await sigil.stop('SIGTERM')).code).toBe(0);
  }, 90_000);

  it('SIGIL_HOST and SIGIL_PORT override the config when no flag is given', async () => {
    const port = await freePort();
    const dir = configDir('{host: 0.0.0.0, port: 1}');
    const sigil = await serve(['--config', join(dir, 'sigil.yaml')], { SIGIL_HOST: '127.0.0.1', SIGIL_PORT: String(port) });
    expect(sigil.url).toBe(`http://127.0.0.1:${port}`);
    expect((await sigil.stop('SIGTERM')).code).toBe(0);
  }, 90_000);

  it('a port that is not a number is refused with the usage, before anything starts', () => {
    const dir = configDir('{host: 127.0.0.1, port: 0}');
    const result = sigil(['serve', '--config', join(dir, 'sigil.yaml'), '--port', 'eighty']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      "sigil serve: --port is a port number from 0 to 65535 (0: any free port), not 'eighty'\nusage: sigil serve [options]\n(sigil serve --help lists every option)\n",
    );
  });
});

describe('sigil serve on a port in use', () => {
  let taken: Server;
  afterAll(() => taken?.close());

  it('says so in one sentence naming the flag that set the port and what to do', async () => {
    taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as AddressInfo;
    const dir = configDir('{host: 127.0.0.1, port: 0}');
    const result = sigil(['serve', '--config', join(dir, 'sigil.yaml'), '--port', String(port)]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      `sigil: port ${port} on 127.0.0.1 (from listen.host in ${join(dir, 'sigil.yaml')}; --port) is already in use, perhaps by another Sigil. ` +
        'Stop that process, or start on another port: sigil serve --port N (0: any free port).\n',
    );
  });
});

describe('stopping sigil serve', () => {
  it('on loopback with no load balancer configured, Ctrl-C stops at once: no drain', async () => {
    const dir = configDir('{host: 127.0.0.1, port: 0}');
    const sigil = await serve(['--config', join(dir, 'sigil.yaml')]);
    const stopped = await sigil.stop('SIGINT');
    expect(stopped.code).toBe(0);
    expect(stopped.stdout).not.toContain('/readyz answers 503 while load balancers move on');
    expect(stopped.stdout).toContain('shutting down: no request in flight');
  }, 90_000);

  it('with listen.trusted_proxies (a load balancer in front), SIGTERM drains for the default 5 s first', async () => {
    const dir = configDir('{host: 127.0.0.1, port: 0, trusted_proxies: [10.0.0.1]}');
    const sigil = await serve(['--config', join(dir, 'sigil.yaml')]);
    const stopped = await sigil.stop('SIGTERM');
    expect(stopped.code).toBe(0);
    expect(stopped.stdout).toContain('"drain_ms":5000,"msg":"shutting down: /readyz answers 503 while load balancers move on"');
    expect(stopped.ms).toBeGreaterThanOrEqual(5000);
  }, 90_000);
});
