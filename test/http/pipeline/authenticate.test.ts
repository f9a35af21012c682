import { describe, expect, it } from 'vitest';
import { firstBody, rawRequest } from '../../support/raw-http.ts';
import { engineAndSigil } from '../../support/engine-and-sigil.ts';

const served = engineAndSigil({ modelNames: ['m'], models: [{ id: 'm' }] });

const head = (authorization: string | undefined) =>
  'POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n' +
  (authorization === undefined ? '' : `authorization: ${authorization}\r\n`) +
  '\r\n';

describe('the authenticate step', () => {
  it('answers 401 missing_api_key before a byte of the body has arrived, and closes the connection', async () => {
    const exchange = await rawRequest(served.sigil.url, [head(undefined)], { waitMs: 3000 });
    expect(exchange.statuses).toEqual([401]);
    expect(exchange.closed).toBe(true);
    expect(JSON.parse(firstBody(exchange))).toEqual({
      error: {
        message: "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.",
        type: 'authentication_error',
        param: null,
        code: 'missing_api_key',
      },
    });
  });

  it('answers 401 invalid_api_key for a key not in the keys file, and for a header that is not Bearer', async () => {
    const unknown = await rawRequest(served.sigil.url, [head('Bearer sk-not-a-key')], { waitMs: 3000 });
    expect(unknown.statuses).toEqual([401]);
    expect(JSON.parse(firstBody(unknown))).toEqual({
      error: { message: 'Incorrect API key provided.', type: 'authentication_error', param: null, code: 'invalid_api_key' },
    });
    const basic = await rawRequest(served.sigil.url, [head('Basic dXNlcjpwYXNz')], { waitMs: 3000 });
    expect(JSON.parse(firstBody(basic))).toEqual({
      error: { message: "The Authorization header must be 'Bearer <key>'.", type: 'authentication_error', param: null, code: 'invalid_api_key' },
    });
    expect(served.engine.requests.filter((r) => r.method === 'POST')).toHaveLength(0);
  });

  it('lets a known key through to the engine', async () => {
    const res = await fetch(`${served.sigil.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${served.sigil.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    expect(served.engine.requests.filter((r) => r.method === 'POST')).toHaveLength(1);
  });
});
