import { describe, expect, it } from 'vitest';
import { firstBody, rawRequest } from '../../support/raw-http.ts';
import { engineAndSigil } from '../../support/engine-and-sigil.ts';

const served = engineAndSigil({
  modelNames: ['m'],
  models: [{ id: 'm' }],
  config: { limits: { max_body_bytes: 1024, body_timeout_ms: 300 } },
});

const head = (key: string, length: number, type = 'application/json') =>
  `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\ncontent-type: ${type}\r\ncontent-length: ${length}\r\n\r\n`;
const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });

describe('the read step', () => {
  it('refuses a body that is not JSON with 415, unread', async () => {
    const exchange = await rawRequest(served.sigil.url, [head(served.sigil.key, body.length, 'text/plain')], { waitMs: 3000 });
    expect(exchange.statuses).toEqual([415]);
    expect(JSON.parse(firstBody(exchange))).toEqual({
      error: {
        message: "The request body must be JSON, sent with 'Content-Type: application/json'.",
        type: 'invalid_request_error',
        param: null,
        code: 'unsupported_media_type',
      },
    });
  });

  it('refuses a body declared larger than limits.max_body_bytes with 413, before reading it', async () => {
    const exchange = await rawRequest(served.sigil.url, [head(served.sigil.key, 1025)], { waitMs: 3000 });
    expect(exchange.statuses).toEqual([413]);
    expect(exchange.closed).toBe(true);
    expect(JSON.parse(firstBody(exchange)).error).toEqual({
      message: 'The request body is larger than 1024 bytes.',
      type: 'invalid_request_error',
      param: null,
      code: 'request_too_large',
    });
  });

  it('refuses a body that does not arrive within limits.body_timeout_ms with 408, and closes the connection', async () => {
    const started = Date.now();
    const exchange = await rawRequest(served.sigil.url, [head(served.sigil.key, body.length), body.slice(0, 10)], { waitMs: 5000 });
    expect(exchange.statuses).toEqual([408]);
    expect(exchange.closed).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(JSON.parse(firstBody(exchange)).error).toEqual({
      message: 'The request body did not arrive within 300 ms.',
      type: 'invalid_request_error',
      param: null,
      code: 'request_timeout',
    });
    expect(served.engine.requests.filter((r) => r.method === 'POST')).toHaveLength(0);
  });

  it('passes a body sent in pieces to the engine as one, byte for byte', async () => {
    const exchange = await rawRequest(served.sigil.url, [head(served.sigil.key, body.length), body.slice(0, 20), body.slice(20)], { gapMs: 50, waitMs: 1500 });
    expect(exchange.statuses).toEqual([200]);
    expect(served.engine.requests.at(-1)!.body.toString('utf8')).toBe(body);
  });
});
