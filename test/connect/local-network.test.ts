import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConnectRefusal, startConnect, type RunningConnect } from '../../src/connect/start.ts';
import { launchChromium, SKIP_BROWSER_TESTS } from '../support/chromium.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** Issue 46, item 6: who may use sigil connect. A real Sigil (TLS in the enclave, sealed bodies) behind it. */
let engine: TestEngine;
let sigil: TestSigil;
let connect: RunningConnect;
let docker: RunningConnect;
let exposed: RunningConnect;
const TOKEN = 'local-token-0123456789abcdef0123456789';

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'm' }],
    config: { tls: { mode: 'self-signed', hostnames: ['localhost'] } },
  });
  const service = sigil.url.replace('127.0.0.1', 'localhost');
  connect = await startConnect({ service, listen: { host: '127.0.0.1', port: 0 }, allowNoTee: true });
  docker = await startConnect({ service, listen: { host: '127.0.0.1', port: 0 }, allowNoTee: true, allowHosts: ['host.docker.internal'], maxAnswerBytes: 64 });
});

afterAll(async () => {
  await Promise.all([connect, docker, exposed].map((c) => c?.close()));
  await sigil.close(0);
  await engine.close();
});

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request with the headers given as they are, Host included (fetch will not send a Host of the caller's choice). */
function send(base: string, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  const url = new URL(base.replace('0.0.0.0', '127.0.0.1'));
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, method, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const hostOf = (running: RunningConnect) => new URL(running.url).host;
const errorOf = (answer: Answer) => (JSON.parse(answer.body) as { error: { code: string; message: string; param: string | null } }).error;
const corsHeaders = (answer: Answer) => Object.keys(answer.headers).filter((h) => h.startsWith('access-control-'));

describe('sigil connect and web pages', () => {
  it('refuses a request a page of another origin sent, with no CORS header', async () => {
    const answer = await send(connect.url, 'GET', '/v1/models', { host: hostOf(connect), origin: 'https://news.example' });
    expect(answer.status).toBe(403);
    expect(errorOf(answer)).toEqual({
      code: 'cross_origin_refused',
      type: 'permission_error',
      param: 'Origin',
      message:
        'sigil connect refuses requests from web pages of other origins: a page you open must not use your verified channel or learn which service you use.',
    });
    expect(corsHeaders(answer)).toEqual([]);
  });

  it('passes no CORS header on to the app, though the service sends one', async () => {
    const direct = await fetch(`${sigil.url}/v1/models`, {
      headers: { origin: 'https://news.example' },
      tls: { rejectUnauthorized: false },
    } as RequestInit).catch(() => undefined);
    const answer = await send(connect.url, 'GET', '/v1/models', { host: hostOf(connect) });
    expect(answer.status).toBe(200);
    expect(corsHeaders(answer)).toEqual([]);
    if (direct !== undefined) expect(direct.headers.get('access-control-allow-origin')).not.toBeNull();
  });

  it.skipIf(SKIP_BROWSER_TESTS)('keeps a page in a browser from reading the model list cross-origin', async () => {
    const page: Server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>elsewhere</title>'));
    await new Promise<void>((resolve) => page.listen(0, '127.0.0.1', resolve));
    const browser = await launchChromium();
    try {
      const tab = await browser.newPage();
      await tab.goto(`http://127.0.0.1:${(page.address() as AddressInfo).port}/`);
      const read = await tab.evaluate(async (url: string) => {
        try {
          const res = await fetch(url);
          return `read ${res.status}: ${(await res.text()).slice(0, 20)}`;
        } catch (err) {
          return `refused: ${(err as Error).name}`;
        }
      }, `${connect.url}/v1/models`);
      expect(read).toBe('refused: TypeError');
    } finally {
      await browser.close();
      await new Promise((resolve) => page.close(resolve));
    }
  });
});

describe('sigil connect for an app in Docker', () => {
  it('refuses Host: host.docker.internal unless --allow-host names it', async () => {
    const port = new URL(connect.url).port;
    const refused = await send(connect.url, 'GET', '/v1/models', { host: `host.docker.internal:${port}` });
    expect(refused.status).toBe(400);
    expect(errorOf(refused)).toMatchObject({ code: 'invalid_value', param: 'Host' });
    expect(errorOf(refused).message).toContain('--allow-host NAME adds a name, e.g. host.docker.internal.');
  });

  it('answers Host: host.docker.internal when --allow-host names it, and still refuses other names', async () => {
    const port = new URL(docker.url).port;
    const status = await send(docker.url, 'GET', '/status', { host: `host.docker.internal:${port}` });
    expect(status.status).toBe(200);
    expect(JSON.parse(status.body)).toMatchObject({ service: expect.any(String) });
    const other = await send(docker.url, 'GET', '/status', { host: `attacker.example:${port}` });
    expect(other.status).toBe(400);
  });
});

describe('what sigil connect relays', () => {
  it('relays GET and POST only: OPTIONS, PUT and DELETE are refused before anything is sent', async () => {
    const before = engine.requests.length;
    for (const method of ['OPTIONS', 'PUT', 'DELETE']) {
      const headers = { host: hostOf(connect), 'content-type': 'application/json', 'content-length': '2' };
      const answer = await send(connect.url, method, '/v1/chat/completions', headers, '{}');
      expect(answer.status).toBe(405);
      expect(errorOf(answer)).toMatchObject({ code: 'method_not_allowed', message: `sigil connect relays GET and POST only, not ${method}.` });
    }
    expect(engine.requests.length).toBe(before);
  });

  it('refuses a body that is not declared JSON (a form a page could post)', async () => {
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    const answer = await send(
      connect.url,
      'POST',
      '/v1/chat/completions',
      { host: hostOf(connect), 'content-type': 'text/plain', authorization: `Bearer ${sigil.key}` },
      body,
    );
    expect(answer.status).toBe(415);
    expect(errorOf(answer)).toMatchObject({ code: 'unsupported_media_type', param: 'Content-Type' });
  });

  it('refuses a JSON answer past its cap with a clear error instead of holding it', async () => {
    const answer = await send(docker.url, 'GET', '/v1/models', { host: hostOf(docker) });
    expect(answer.status).toBe(502);
    expect(errorOf(answer)).toMatchObject({
      code: 'upstream_bad_response',
      message:
        "sigil connect did not pass this answer on: the service's answer is larger than 64 bytes, the most accepted (sigil connect --max-answer-mib raises the cap).",
    });
  });
});

describe('sigil connect beyond loopback', () => {
  beforeAll(async () => {
    const service = sigil.url.replace('127.0.0.1', 'localhost');
    exposed = await startConnect({ service, listen: { host: '0.0.0.0', port: 0 }, allowNoTee: true, network: { localToken: TOKEN, serviceApiKey: sigil.key } });
  });

  it('refuses to listen beyond loopback without --expose-to-network', async () => {
    const refusal = await startConnect({ service: sigil.url, listen: { host: '0.0.0.0', port: 0 }, allowNoTee: true }).catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(ConnectRefusal);
    expect((refusal as Error).message).toContain('--expose-to-network accepts that, with a local token every app must send (SIGIL_CONNECT_TOKEN)');
  });

  it('refuses a short local token', async () => {
    const refusal = await startConnect({
      service: sigil.url,
      listen: { host: '0.0.0.0', port: 0 },
      allowNoTee: true,
      network: { localToken: 'short', serviceApiKey: 'k' },
    }).catch((e: unknown) => e);
    expect((refusal as Error).message).toBe('the local token is shorter than 32 characters: anyone on the network could guess it (e.g. openssl rand -hex 32)');
  });

  it('answers only an app that sends the local token, and sends the service its own key instead', async () => {
    const port = new URL(exposed.url).port;
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'over the network' }] });
    const headers = { host: `192.168.1.20:${port}`, 'content-type': 'application/json' };
    const none = await send(exposed.url, 'POST', '/v1/chat/completions', headers, body);
    expect([none.status, errorOf(none).code]).toEqual([401, 'missing_api_key']);
    const wrong = await send(exposed.url, 'POST', '/v1/chat/completions', { ...headers, authorization: `Bearer ${sigil.key}` }, body);
    expect([wrong.status, errorOf(wrong).code]).toEqual([401, 'invalid_api_key']);
    const named = await send(exposed.url, 'GET', '/v1/models', { host: `printer.lan:${port}`, authorization: `Bearer ${TOKEN}` });
    expect(named.status).toBe(400);
    const ok = await send(exposed.url, 'POST', '/v1/chat/completions', { ...headers, authorization: `Bearer ${TOKEN}` }, body);
    expect(ok.status).toBe(200);
    expect((JSON.parse(ok.body) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content).toBe(engine.reply);
    expect(exposed.fetch.receipts.at(-1)).toMatchObject({ ok: true });
  });
});
