import { createServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { engineAndSigil } from '../../support/engine-and-sigil.ts';
import { requestLines } from '../../support/sigil.ts';

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

const served = engineAndSigil({
  modelNames: ['engine/renamed', 'm'],
  models: [
    { id: 'renamed', upstream_model: 'engine/renamed', upstream: 'e' },
    { id: 'm', upstream: ['gone', 'e'] },
    { id: 's', upstream_model: 'm', upstream: 'salted' },
  ],
  upstreams: async (engine) => {
    const gone = await closedPort();
    return { gone: { url: `http://127.0.0.1:${gone}/v1` }, e: { url: engine.baseUrl }, salted: { url: engine.baseUrl, cache_salt: true } };
  },
});

afterEach(() => {
  served.engine.behaviour = {};
});

const post = (body: string) =>
  fetch(`${served.sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${served.sigil.key}`, 'content-type': 'application/json' },
    body,
  });

describe('the forward step', () => {
  it("gives the engine the client's bytes with only the model value changed to the engine's name", async () => {
    const res = await post('{"model":"renamed","messages":[{"role":"user","content":"hi"}],"n":12345678901234567890}');
    expect(res.status).toBe(200);
    expect(served.engine.requests.at(-1)!.body.toString('utf8')).toBe(
      '{"model":"engine/renamed","messages":[{"role":"user","content":"hi"}],"n":12345678901234567890}',
    );
  });

  it('fails over to the next engine when one refuses the connection, and logs the one that answered', async () => {
    const from = served.sigil.logs.length;
    const res = await post('{"model":"m","messages":[{"role":"user","content":"hi"}]}');
    expect(res.status).toBe(200);
    const [line] = await requestLines(served.sigil, from);
    expect(line!.upstream).toBe('e');
  });

  it("salts the engine's prefix cache per API key where the upstream takes cache_salt", async () => {
    await post('{"model":"s","messages":[{"role":"user","content":"hi"}]}');
    const salted = JSON.parse(served.engine.requests.at(-1)!.body.toString('utf8')) as Record<string, unknown>;
    expect(salted.model).toBe('m');
    expect(typeof salted.cache_salt).toBe('string');
    await post('{"model":"s","messages":[{"role":"user","content":"hi"}]}');
    expect((JSON.parse(served.engine.requests.at(-1)!.body.toString('utf8')) as Record<string, unknown>).cache_salt).toBe(salted.cache_salt);
  });

  it("turns an engine's refusal into an upstream error with the catalogue's model name and the engine's Retry-After", async () => {
    served.engine.behaviour = { status: 429, retryAfter: '7', errorMessage: 'engine/renamed is overloaded' };
    const res = await post('{"model":"renamed","messages":[{"role":"user","content":"hi"}]}');
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('7');
    expect(await res.json()).toEqual({
      error: { message: 'renamed is overloaded', type: 'requests', param: null, code: 'upstream_rate_limited' },
    });
  });
});
