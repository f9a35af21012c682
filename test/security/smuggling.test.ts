import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawRequest } from '../support/raw-http.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/**
 * Request smuggling: a request whose framing two parsers could read differently is refused with 400
 * and the connection closed, and neither it nor a request hidden in its body reaches the engine.
 */
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

const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'smuggle-probe' }] });
const head = (framing: string, requestLine = 'POST /v1/chat/completions HTTP/1.1') =>
  `${requestLine}\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${sigil.key}\r\nContent-Type: application/json\r\n${framing}\r\n`;
const chunk = (data: string) => `${Buffer.byteLength(data).toString(16)}\r\n${data}\r\n`;
const chunked = (data: string) => `${chunk(data)}0\r\n\r\n`;
/** A second, complete request hidden where a desynchronised parser would find it. */
const hidden = () =>
  `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${sigil.key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;

const cases: Array<[string, () => string]> = [
  [
    'Content-Length and Transfer-Encoding together (CL.TE)',
    () => head(`Content-Length: ${body.length}\r\nTransfer-Encoding: chunked\r\n`) + chunked(body) + hidden(),
  ],
  [
    'Transfer-Encoding and Content-Length together (TE.CL, short length)',
    () => head(`Transfer-Encoding: chunked\r\nContent-Length: 4\r\n`) + chunked(body + hidden()),
  ],
  [
    'two different Content-Length headers',
    () => head(`Content-Length: ${body.length}\r\nContent-Length: ${body.length + hidden().length}\r\n`) + body + hidden(),
  ],
  ['two identical Content-Length headers', () => head(`Content-Length: ${body.length}\r\nContent-Length: ${body.length}\r\n`) + body],
  ['a Content-Length list', () => head(`Content-Length: ${body.length}, ${body.length}\r\n`) + body],
  ['a signed Content-Length', () => head(`Content-Length: +${body.length}\r\n`) + body],
  ['a negative Content-Length', () => head('Content-Length: -1\r\n') + body],
  ['a Content-Length with a hex value', () => head(`Content-Length: 0x${body.length.toString(16)}\r\n`) + body],
  ['obs-fold (a header continued on the next line)', () => head(`Content-Length: ${body.length}\r\nX-Folded: a\r\n b\r\n`) + body],
  ['obs-fold hiding Transfer-Encoding', () => head(`Content-Length: ${body.length}\r\nX-Folded: a\r\n Transfer-Encoding: chunked\r\n`) + body],
  ['whitespace before the colon of Transfer-Encoding', () => head('Transfer-Encoding : chunked\r\n') + chunked(body) + hidden()],
  ['whitespace inside a header name', () => head(`Content-Length: ${body.length}\r\nTransfer Encoding: chunked\r\n`) + body],
  ['Transfer-Encoding twice (chunked, then identity)', () => head('Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n') + chunked(body)],
  ['chunked not the final coding', () => head(`Transfer-Encoding: chunked, identity\r\nContent-Length: ${body.length}\r\n`) + body],
  ['an unknown coding (xchunked)', () => head('Transfer-Encoding: xchunked\r\n') + chunked(body) + hidden()],
  ['a chunk size with a 0x prefix', () => head('Transfer-Encoding: chunked\r\n') + `0x${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`],
  ['a chunk line ended by a bare LF', () => head('Transfer-Encoding: chunked\r\n') + `${body.length.toString(16)};a=b\n${body}\r\n0\r\n\r\n`],
  ['a chunk longer than its size says', () => head('Transfer-Encoding: chunked\r\n') + `${(body.length - 10).toString(16)}\r\n${body}\r\n0\r\n\r\n`],
  [
    'header lines ended by bare LF',
    () =>
      `POST /v1/chat/completions HTTP/1.1\nHost: 127.0.0.1\nAuthorization: Bearer ${sigil.key}\nContent-Type: application/json\nContent-Length: ${body.length}\n\n${body}`,
  ],
  ['a bare CR inside a header value', () => head(`Content-Length: ${body.length}\r\nX-A: a\rTransfer-Encoding: chunked\r\n`) + body],
  ['a NUL inside a header value', () => head(`Content-Length: ${body.length}\r\nX-A: a\0b\r\n`) + body],
  ['no Host header in HTTP/1.1', () => head(`Content-Length: ${body.length}\r\n`).replace('Host: 127.0.0.1\r\n', '') + body],
];

describe('request smuggling is refused before anything reaches the engine', () => {
  it.each(cases)('%s: 400, connection closed, engine untouched', async (_name, request) => {
    const before = engine.requests.length;
    const exchange = await rawRequest(sigil.url, [request()], { waitMs: 1500 });
    expect(exchange.statuses, exchange.text).toEqual([400]);
    expect(exchange.closed).toBe(true);
    expect(engine.requests.length).toBe(before);
  });

  it('a well-formed chunked request is served once, and the engine gets a Content-Length framed copy', async () => {
    const before = engine.requests.length;
    const split = Math.floor(body.length / 2);
    const exchange = await rawRequest(
      sigil.url,
      [head('Transfer-Encoding: chunked\r\nConnection: close\r\n') + chunk(body.slice(0, split)) + chunk(body.slice(split)) + '0\r\n\r\n'],
      { waitMs: 3000 },
    );
    expect(exchange.statuses).toEqual([200]);
    expect(engine.requests.length).toBe(before + 1);
    const received = engine.requests.at(-1)!;
    expect(received.body.toString()).toBe(body);
    expect(received.headers['content-length']).toBe(String(body.length));
    expect(received.headers['transfer-encoding']).toBeUndefined();
  });

  it('a body with a request inside it stays a body: one answer, one engine request', async () => {
    const inner = hidden();
    const wrapped = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: inner }] });
    const before = engine.requests.length;
    const exchange = await rawRequest(sigil.url, [head(`Content-Length: ${wrapped.length}\r\nConnection: close\r\n`) + wrapped], { waitMs: 3000 });
    expect(exchange.statuses).toEqual([200]);
    expect(engine.requests.length).toBe(before + 1);
    expect(engine.requests.at(-1)!.body.toString()).toBe(wrapped);
  });

  it('pipelined requests are answered one by one, each reaching the engine once (the harness sees a second request)', async () => {
    const before = engine.requests.length;
    const exchange = await rawRequest(sigil.url, [head(`Content-Length: ${body.length}\r\n`) + body + hidden()], { waitMs: 1500 });
    expect(exchange.statuses).toEqual([200, 200]);
    expect(engine.requests.length).toBe(before + 2);
  });
});
