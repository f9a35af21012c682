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
        message: "You didn't provide an API key. Send it as 'Authorization: Bearer <key>' or 'x-api-key: <key>'.",
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

  it("takes the key as x-api-key, as Anthropic's SDKs send it, unless a bearer key is sent (which is then the key); refuses x-api-key sent twice", async () => {
    const post = (headers: Record<string, string>) =>
      fetch(`${served.sigil.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
      });
    const before = served.engine.requests.filter((r) => r.method === 'POST').length;
    expect((await post({ 'x-api-key': served.sigil.key })).status).toBe(200);
    expect((await post({ 'x-api-key': served.sigil.key, authorization: `Bearer ${served.sigil.key}` })).status).toBe(200);
    // An OpenAI client's stray x-api-key changes nothing: the bearer key is the caller.
    expect((await post({ 'x-api-key': 'sk-other', authorization: `Bearer ${served.sigil.key}` })).status).toBe(200);
    const wrongBearer = await post({ 'x-api-key': served.sigil.key, authorization: 'Bearer sk-not-a-key' });
    expect(((await wrongBearer.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key');
    const wrong = await post({ 'x-api-key': 'sk-not-a-key' });
    expect(((await wrong.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key');
    const twice = await rawRequest(
      served.sigil.url,
      [
        `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 2\r\nx-api-key: ${served.sigil.key}\r\nx-api-key: ${served.sigil.key}\r\n\r\n{}`,
      ],
      { waitMs: 3000 },
    );
    expect(twice.statuses).toEqual([400]);
    expect(JSON.parse(firstBody(twice)).error).toMatchObject({ code: 'duplicate_header', param: 'x-api-key' });
    expect(served.engine.requests.filter((r) => r.method === 'POST').length).toBe(before + 3);
  });
});
