import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { rawRequest } from '../support/raw-http.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/**
 * No SSRF path: nothing a client controls (body, headers, Host, request target) changes which engine
 * Sigil calls or which path it asks for. An "attacker" server on another port counts every connection.
 */
let engine: TestEngine;
let sigil: TestSigil;
let attacker: Server;
let attackerUrl = '';
let attackerConnections = 0;
const attackerSockets = new Set<Socket>();

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  attacker = createServer((socket) => {
    attackerConnections++;
    attackerSockets.add(socket);
    socket.on('close', () => attackerSockets.delete(socket));
    socket.on('data', () => socket.end('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}'));
  });
  await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', () => resolve()));
  attackerUrl = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}`;
  sigil = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm', upstream: 'e' }] });
});

afterAll(async () => {
  await sigil.close();
  for (const s of attackerSockets) s.destroy();
  await new Promise<void>((resolve) => attacker.close(() => resolve()));
  await engine.close();
});

let before = 0;
beforeEach(() => {
  before = engine.requests.length;
});

/** The one engine request this test made went to the configured engine, at the configured path. */
function expectOnlyConfiguredEngine(count = 1): void {
  expect(attackerConnections).toBe(0);
  const made = engine.requests.slice(before);
  expect(made).toHaveLength(count);
  for (const r of made) {
    expect(r.method).toBe('POST');
    expect(r.path).toBe('/v1/chat/completions');
    expect(r.headers.host).toBe(new URL(engine.url).host);
  }
}

const okBody = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };

async function chat(body: unknown, headers: Record<string, string> = {}): Promise<number> {
  const res = await fetch(`${sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  await res.arrayBuffer();
  return res.status;
}

describe('client input never chooses the upstream', () => {
  it('a URL as the model id is an unknown model, and nobody is called', async () => {
    for (const model of [
      `${attackerUrl}/v1`,
      attackerUrl,
      '//127.0.0.1:1/v1',
      'http://evil.invalid/',
      'm@127.0.0.1',
      '../../m',
      'm/../../admin',
      'm?x=1',
      'm#x',
    ]) {
      expect(await chat({ ...okBody, model })).toBe(404);
    }
    expectOnlyConfiguredEngine(0);
  });

  it('URL-looking fields in a valid body are forwarded as data, to the configured engine only', async () => {
    const body = {
      ...okBody,
      base_url: attackerUrl,
      api_base: attackerUrl,
      url: attackerUrl,
      upstream: attackerUrl,
      endpoint: `${attackerUrl}/v1/chat/completions`,
      region: attackerUrl,
      user: attackerUrl,
    };
    expect(await chat(body)).toBe(200);
    expectOnlyConfiguredEngine();
    const { region: _region, ...forwarded } = body;
    expect(JSON.parse(engine.requests.at(-1)!.body.toString())).toEqual(forwarded);
  });

  it('routing headers (X-Forwarded-*, Forwarded, X-Original-URL, ...) are ignored', async () => {
    const host = new URL(attackerUrl).host;
    const headers = {
      'x-forwarded-host': host,
      'x-forwarded-for': '127.0.0.2',
      'x-forwarded-proto': 'http',
      'x-forwarded-port': new URL(attackerUrl).port,
      forwarded: `for=127.0.0.2;host=${host};proto=http`,
      'x-original-url': `${attackerUrl}/v1/chat/completions`,
      'x-rewrite-url': '/admin',
      'x-upstream': attackerUrl,
      'x-host': host,
      'x-real-ip': '127.0.0.2',
    };
    expect(await chat(okBody, headers)).toBe(200);
    expectOnlyConfiguredEngine();
    for (const name of Object.keys(headers)) expect(engine.requests.at(-1)!.headers[name]).toBeUndefined();
  });

  it.each([
    ['a Host header naming the attacker', 200, (h: string) => `POST /v1/chat/completions HTTP/1.1\r\nHost: ${h}\r\n`],
    ['an absolute-form target naming the attacker', 200, (h: string) => `POST http://${h}/v1/chat/completions HTTP/1.1\r\nHost: ${h}\r\n`],
    ['an absolute-form target on another loopback address', 200, () => 'POST http://127.0.0.2:1/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.2:1\r\n'],
    // The path //host/v1/chat/completions names no route: refused before any engine is called.
    ['a network-path target (//host/path)', 404, (h: string) => `POST //${h}/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n`],
    ['an absolute-form target with userinfo', 200, (h: string) => `POST http://user:pw@${h}/v1/chat/completions HTTP/1.1\r\nHost: ${h}\r\n`],
  ])('%s: only the configured engine is called, at its own path', async (_name, status, start) => {
    const body = JSON.stringify(okBody);
    const request = `${start(new URL(attackerUrl).host)}Authorization: Bearer ${sigil.key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`;
    const exchange = await rawRequest(sigil.url, [request], { waitMs: 3000 });
    expect(exchange.statuses).toEqual([status]);
    expectOnlyConfiguredEngine(status === 200 ? 1 : 0);
  });

  it('path tricks do not reach other engine paths', async () => {
    for (const path of [
      '/v1/chat/completions/../models',
      '/v1/chat/completions%2f..%2fmodels',
      '/v1/../v1/chat/completions?url=http://127.0.0.2:1/',
      '/v1/chat/completions;x=1',
    ]) {
      const res = await fetch(`${sigil.url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
        body: JSON.stringify(okBody),
      });
      await res.arrayBuffer();
      expect(res.status, path).toBeLessThan(500);
    }
    expect(attackerConnections).toBe(0);
    for (const r of engine.requests.slice(before)) expect(r.path).toBe('/v1/chat/completions');
  });
});
