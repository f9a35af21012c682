import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { firstBody, rawRequest } from '../support/raw-http.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** Issue 11 items 5-7: what a hostile client meets at the HTTP level. */
let engine: TestEngine;
let sigil: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm', upstream: 'e' }] });
});

afterAll(async () => {
  await sigil.close();
  await engine.close();
});

const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
const request = (headers: string[], payload = body) =>
  `POST /v1/chat/completions HTTP/1.1\r\n${headers.join('\r\n')}\r\nContent-Length: ${Buffer.byteLength(payload)}\r\nConnection: close\r\n\r\n${payload}`;

const rejections = async (): Promise<Map<string, number>> => {
  const text = await (await fetch(`${sigil.url}/metrics`)).text();
  return new Map([...text.matchAll(/^sigil_http_rejections_total\{reason="([^"]+)"\} (\d+)$/gm)].map((m) => [m[1]!, Number(m[2])]));
};

describe('duplicate headers', () => {
  it.each([
    ['host', ['Host: 127.0.0.1', 'Host: evil.example']],
    ['content-type', ['Host: h', 'Content-Type: application/json', 'Content-Type: text/plain']],
    ['x-service-receipt', ['Host: h', 'Content-Type: application/json', 'X-Service-Receipt: true', 'X-Service-Receipt: false']],
    ['x-service-nonce', ['Host: h', 'Content-Type: application/json', 'X-Service-Nonce: a', 'X-Service-Nonce: b']],
  ])('two %s headers are refused with 400 duplicate_header and reach no engine', async (name, headers) => {
    const before = engine.requests.length;
    const exchange = await rawRequest(sigil.url, [request([...headers, `Authorization: Bearer ${sigil.key}`])], { waitMs: 2000 });
    expect(exchange.statuses).toEqual([400]);
    expect(JSON.parse(firstBody(exchange))).toEqual({
      error: { message: `The ${name} header must be sent once.`, type: 'invalid_request_error', param: name, code: 'duplicate_header' },
    });
    expect(engine.requests.length).toBe(before);
  });
});

describe('early replies', () => {
  it('a 401 sent before the body closes the connection instead of reading a huge body', async () => {
    const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n`;
    // Old behaviour: Node drained the body behind the 401 and kept the connection until the body timeout.
    const exchange = await rawRequest(sigil.url, [head, Buffer.alloc(64 * 1024, 0x20), Buffer.alloc(64 * 1024, 0x20)], { waitMs: 5000, gapMs: 50 });
    expect(exchange.statuses).toEqual([401]);
    expect(exchange.text.toLowerCase()).toContain('connection: close');
    expect(exchange.closed).toBe(true);
  });

  it('a 413 for a body over max_body_bytes closes the connection too', async () => {
    const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer ${sigil.key}\r\nContent-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n`;
    const exchange = await rawRequest(sigil.url, [head, Buffer.alloc(64 * 1024, 0x20)], { waitMs: 5000, gapMs: 50 });
    expect(exchange.statuses).toEqual([413]);
    expect(exchange.text.toLowerCase()).toContain('connection: close');
    expect(exchange.closed).toBe(true);
  });
});

describe('HTTP-level rejections', () => {
  it('answer malformed HTTP in the OpenAI shape, count it, and log the reason without the bytes', async () => {
    const before = await rejections();
    const smuggle = `POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`;
    const exchange = await rawRequest(sigil.url, [smuggle], { waitMs: 2000 });
    expect(exchange.statuses).toEqual([400]);
    expect(JSON.parse(firstBody(exchange))).toEqual({
      error: { message: 'The request is not valid HTTP/1.1.', type: 'invalid_request_error', param: null, code: 'bad_request' },
    });
    expect(exchange.closed).toBe(true);
    const after = await rejections();
    const total = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
    expect(total(after)).toBe(total(before) + 1);
    const line = sigil.logs.filter((l) => l.includes('"msg":"http rejection"')).at(-1);
    expect(JSON.parse(line!)).toMatchObject({ status: 400, level: 40 });
  });

  it('answer headers larger than Node accepts with 431 in the OpenAI shape', async () => {
    const exchange = await rawRequest(sigil.url, [`GET /v1/models HTTP/1.1\r\nHost: h\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`], { waitMs: 2000 });
    expect(exchange.statuses).toEqual([431]);
    expect(JSON.parse(firstBody(exchange)).error.code).toBe('request_header_fields_too_large');
    expect((await rejections()).get('headers_too_large')).toBeGreaterThanOrEqual(1);
  });
});
