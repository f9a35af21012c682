import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawRequest } from '../support/raw-http.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/**
 * Sigil is a boundary for headers in both directions: the engine's headers (cookies, server banners,
 * secrets) never reach the client, the engine's credentials go to the engine only, and the client's
 * credentials and hop-by-hop headers never reach the engine.
 */
const ENGINE_SECRET = `x-engine-secret-${randomBytes(8).toString('hex')}`;
const ENGINE_KEY = `engine-cred-${randomBytes(12).toString('hex')}`;
const KEY_ENV = 'SIGIL_SECURITY_TEST_ENGINE_KEY';

/** Headers a careless engine (or the load balancer in front of it) might send. */
const LEAKY: Record<string, string> = {
  'set-cookie': `engine_session=${ENGINE_SECRET}; HttpOnly`,
  'x-engine-secret': ENGINE_SECRET,
  server: `vllm-internal-build-${ENGINE_SECRET}`,
  'x-powered-by': 'uvicorn',
  'www-authenticate': 'Bearer realm="engine"',
  'access-control-allow-origin': '*',
  'access-control-allow-credentials': 'true',
  'x-request-id': 'engine-request-id',
  via: '1.1 internal-lb',
  'alt-svc': 'h3=":443"',
  'strict-transport-security': 'max-age=1',
  'x-ratelimit-limit': '999999',
};

interface Recorded {
  headers: IncomingHttpHeaders;
  body: string;
}

let engine: Server;
let sigil: TestSigil;
const received: Recorded[] = [];

function answer(mode: string, res: import('node:http').ServerResponse): void {
  const chunk = (delta: unknown, finish: string | null) =>
    JSON.stringify({ id: 'chatcmpl-h', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] });
  switch (mode) {
    case 'stream':
      res.writeHead(200, { ...LEAKY, 'content-type': 'text/event-stream' });
      res.end(`data: ${chunk({ role: 'assistant', content: 'hi' }, null)}\n\ndata: ${chunk({}, 'stop')}\n\ndata: [DONE]\n\n`);
      return;
    case 'bad':
      res.writeHead(400, { ...LEAKY, 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'error', message: 'prompt too long', type: 'BadRequestError', param: null, code: 400 }));
      return;
    case 'busy':
      res.writeHead(429, { ...LEAKY, 'content-type': 'application/json', 'retry-after': '7' });
      res.end(JSON.stringify({ error: { message: 'busy', type: 'rate_limit', code: 429 } }));
      return;
    case 'fail':
      res.writeHead(500, { ...LEAKY, 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `internal failure, token ${ENGINE_SECRET}, auth ${ENGINE_KEY}` } }));
      return;
    default:
      res.writeHead(200, { ...LEAKY, 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'chatcmpl-h',
          object: 'chat.completion',
          created: 1,
          model: 'm',
          choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
        }),
      );
  }
}

beforeAll(async () => {
  engine = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      if (req.method === 'GET') {
        res.writeHead(200, { ...LEAKY, 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data: [{ id: 'm', object: 'model' }] }));
        return;
      }
      received.push({ headers: req.headers, body });
      answer((JSON.parse(body) as { mode?: string }).mode ?? 'json', res);
    });
  });
  await new Promise<void>((resolve) => engine.listen(0, '127.0.0.1', () => resolve()));
  process.env[KEY_ENV] = ENGINE_KEY;
  sigil = await startTestSigil({
    upstreams: { e: { url: `http://127.0.0.1:${(engine.address() as AddressInfo).port}/v1`, api_key_env: KEY_ENV } },
    models: [{ id: 'm', upstream: 'e' }],
  });
});

afterAll(async () => {
  await sigil.close();
  engine.closeAllConnections();
  await new Promise<void>((resolve) => engine.close(() => resolve()));
  delete process.env[KEY_ENV];
});

/** Every header a client may see from Sigil; anything else came from somewhere it should not. */
const SIGIL_HEADERS = new Set([
  'content-type',
  'content-length',
  'transfer-encoding',
  'date',
  'connection',
  'keep-alive',
  'x-request-id',
  'cache-control',
  'x-accel-buffering',
  'retry-after',
  'x-service-receipt',
  'x-service-receipt-id',
]);

async function chat(mode: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; text: string }> {
  const res = await fetch(`${sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-service-receipt': 'true', ...headers },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: mode === 'stream', mode }),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

describe("the engine's response headers never reach the client", () => {
  it.each([
    ['json', 200],
    ['stream', 200],
    ['bad', 400],
    ['busy', 429],
    ['fail', 502],
  ] as const)('engine answer %s: status %i, only Sigil headers, no engine secret anywhere', async (mode, status) => {
    const res = await chat(mode);
    expect(res.status).toBe(status);
    const names = [...res.headers.keys()];
    expect(names.filter((n) => !SIGIL_HEADERS.has(n))).toEqual([]);
    expect(res.headers.get('x-request-id')).not.toBe(LEAKY['x-request-id']);
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f]{16}$/);
    if (mode === 'busy') expect(res.headers.get('retry-after')).toBe('7');
    else expect(res.headers.get('retry-after')).toBeNull();
    const everything = JSON.stringify([...res.headers]) + res.text;
    expect(everything).not.toContain(ENGINE_SECRET);
    expect(everything).not.toContain(ENGINE_KEY);
  });

  it('the model list carries no engine header either', async () => {
    const res = await fetch(`${sigil.url}/v1/models`);
    await res.text();
    // The model list is public: Sigil itself lets any origin read it (the trust page, docs/api.md).
    expect([...res.headers.keys()].filter((n) => !SIGIL_HEADERS.has(n) && n !== 'access-control-allow-origin')).toEqual([]);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
  });
});

describe("the engine's credentials go to the engine only", () => {
  it('every engine request carries them instead of the client key', async () => {
    const from = received.length;
    await chat('json');
    await chat('stream');
    expect(received.length).toBe(from + 2);
    for (const r of received.slice(from)) expect(r.headers.authorization).toBe(`Bearer ${ENGINE_KEY}`);
  });

  it('no public endpoint, error or log line shows them', async () => {
    const texts: string[] = [];
    for (const path of [
      '/v1/verify/policy',
      '/v1/verify/jwks.json',
      '/v1/verify/attestation',
      '/readyz',
      '/healthz',
      '/v1/models?detail=true',
      '/v1/models/m',
    ]) {
      const res = await fetch(`${sigil.url}${path}`);
      texts.push(JSON.stringify([...res.headers]), await res.text());
    }
    for (const mode of ['json', 'stream', 'bad', 'busy', 'fail']) {
      const res = await chat(mode);
      texts.push(JSON.stringify([...res.headers]), res.text);
    }
    const all = texts.join('\n') + sigil.logs.join('\n');
    expect(all).not.toContain(ENGINE_KEY);
    expect(all).not.toContain(ENGINE_SECRET);
  });
});

describe("the client's credentials and hop-by-hop headers never reach the engine", () => {
  it('Authorization, Cookie, Proxy-Authorization and the rest stay with Sigil', async () => {
    const from = received.length;
    const clientOnly = {
      cookie: 'client_session=c00k1e',
      'proxy-authorization': 'Basic cHJveHk6c2VjcmV0',
      'x-api-key': 'client-x-api-key',
      'openai-organization': 'org-client',
      origin: 'https://client.example',
      referer: 'https://client.example/page',
      'user-agent': 'client-agent/1.0',
      'x-service-nonce': 'nonce-for-sigil',
    };
    expect((await chat('json', clientOnly)).status).toBe(200);
    const sent = received[from]!.headers;
    expect(sent.authorization).toBe(`Bearer ${ENGINE_KEY}`);
    for (const name of Object.keys(clientOnly)) expect(sent[name], name).toBeUndefined();
    expect(JSON.stringify(sent)).not.toContain(sigil.key);
  });

  it('Connection, Keep-Alive, TE, Trailer, Upgrade, Proxy-Connection and headers named in Connection stay with Sigil', async () => {
    const from = received.length;
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    const request = [
      'POST /v1/chat/completions HTTP/1.1',
      'Host: 127.0.0.1',
      `Authorization: Bearer ${sigil.key}`,
      'Content-Type: application/json',
      `Content-Length: ${body.length}`,
      'Connection: keep-alive, x-hop-by-hop',
      'X-Hop-By-Hop: named-in-connection',
      'Keep-Alive: timeout=5, max=100',
      'TE: trailers',
      'Trailer: x-late',
      'Proxy-Connection: keep-alive',
      'Proxy-Authorization: Basic cHJveHk6c2VjcmV0',
      'Cookie: client_session=c00k1e',
      '',
      body,
    ].join('\r\n');
    const exchange = await rawRequest(sigil.url, [request], { waitMs: 1500 });
    expect(exchange.statuses).toEqual([200]);
    expect(received.length).toBe(from + 1);
    const sent = received[from]!.headers;
    for (const name of ['x-hop-by-hop', 'keep-alive', 'te', 'trailer', 'upgrade', 'proxy-connection', 'proxy-authorization', 'cookie']) {
      expect(sent[name], name).toBeUndefined();
    }
    expect(sent.connection ?? 'keep-alive').toBe('keep-alive');
    expect(sent.authorization).toBe(`Bearer ${ENGINE_KEY}`);
  });

  it('an Upgrade request is served as a plain request and not passed on as an upgrade', async () => {
    const from = received.length;
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    const request = `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${sigil.key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n${body}`;
    const exchange = await rawRequest(sigil.url, [request], { waitMs: 1500 });
    // Served as a plain request: no 101, no protocol switch, and the engine sees no upgrade.
    expect(exchange.statuses).toEqual([200]);
    expect(received.length).toBe(from + 1);
    for (const r of received.slice(from)) {
      expect(r.headers.upgrade).toBeUndefined();
      expect(r.headers['http2-settings']).toBeUndefined();
    }
  });
});
