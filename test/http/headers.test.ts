import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

let engine: TestEngine;
let plain: TestSigil;
let configured: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  process.env.SIGIL_TEST_ENGINE_KEY = 'engine-secret-key-77';
  plain = await startTestSigil({ upstreams: { main: { url: engine.baseUrl, api_key_env: 'SIGIL_TEST_ENGINE_KEY' } }, models: [{ id: 'm' }] });
  configured = await startTestSigil({
    upstreams: { main: { url: engine.baseUrl, forward_headers: ['X-Trace-Id', 'authorization'] } },
    models: [{ id: 'm' }],
    config: { cors: { allowed_origins: ['https://app.example'] } },
  });
});

afterAll(async () => {
  await Promise.all([plain.close(), configured.close()]);
  await engine.close();
});

const chat = (sigil: TestSigil, headers: Record<string, string> = {}) =>
  fetch(`${sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  });

describe('headers sent to the engine', () => {
  it('carry the engine credentials and none of the client headers by default', async () => {
    const res = await chat(plain, { 'x-trace-id': 't-1', cookie: 'session=abc', 'proxy-authorization': 'Basic x' });
    await res.text();
    const sent = engine.requests.at(-1)!.headers;
    expect(sent.authorization).toBe('Bearer engine-secret-key-77');
    expect(sent['x-trace-id']).toBeUndefined();
    expect(sent.cookie).toBeUndefined();
    expect(sent['proxy-authorization']).toBeUndefined();
    expect(JSON.stringify(Object.fromEntries(res.headers))).not.toContain('engine-secret-key-77');
  });

  it('drop a listed header that the client names in Connection (it is for one hop only)', async () => {
    const { request } = await import('node:http');
    const url = new URL(configured.url);
    await new Promise<void>((resolve, reject) => {
      const req = request(
        {
          host: url.hostname,
          port: url.port,
          method: 'POST',
          path: '/v1/chat/completions',
          headers: { authorization: `Bearer ${configured.key}`, 'content-type': 'application/json', connection: 'keep-alive, x-trace-id', 'x-trace-id': 't-3' },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve());
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }));
    });
    expect(engine.requests.at(-1)!.headers['x-trace-id']).toBeUndefined();
  });

  it('pass only the configured client headers, Authorization included when listed', async () => {
    await (await chat(configured, { 'x-trace-id': 't-2', cookie: 'session=abc' })).text();
    const sent = engine.requests.at(-1)!.headers;
    expect(sent['x-trace-id']).toBe('t-2');
    expect(sent.authorization).toBe(`Bearer ${configured.key}`);
    expect(sent.cookie).toBeUndefined();
  });
});

describe('CORS', () => {
  it('is off unless configured: no Access-Control headers, preflight refused', async () => {
    const res = await chat(plain, { origin: 'https://app.example' });
    await res.text();
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
    const preflight = await fetch(`${plain.url}/v1/chat/completions`, {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' },
    });
    expect(preflight.status).toBe(405);
  });

  it('answers preflights and exposes the receipt headers for an allowed origin only', async () => {
    const preflight = await fetch(`${configured.url}/v1/chat/completions`, {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(preflight.headers.get('access-control-allow-methods')).toBe('POST');
    expect(preflight.headers.get('access-control-allow-headers')).toMatch(
      /^authorization, content-type, x-service-receipt, x-service-nonce, ehbp-encapsulated-key, x-api-key, /,
    );
    const res = await chat(configured, { origin: 'https://app.example' });
    await res.text();
    expect(res.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(res.headers.get('access-control-expose-headers')).toContain('x-service-receipt');
    const foreign = await chat(configured, { origin: 'https://evil.example' });
    await foreign.text();
    expect(foreign.headers.get('access-control-allow-origin')).toBeNull();
  });
});
