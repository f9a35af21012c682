import { createServer } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../../support/test-engine.ts';
import { requestLines, startTestSigil, type TestSigil } from '../../support/sigil.ts';

let engine: TestEngine;
let sigil: TestSigil;

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['engine/renamed', 'm'] });
  const gone = await closedPort();
  sigil = await startTestSigil({
    upstreams: { gone: { url: `http://127.0.0.1:${gone}/v1` }, e: { url: engine.baseUrl }, salted: { url: engine.baseUrl, cache_salt: true } },
    models: [
      { id: 'renamed', upstream_model: 'engine/renamed', upstream: 'e' },
      { id: 'm', upstream: ['gone', 'e'] },
      { id: 's', upstream_model: 'm', upstream: 'salted' },
    ],
  });
});

afterAll(async () => {
  await sigil.close(0);
  await engine.close();
});

afterEach(() => {
  engine.behaviour = {};
});

const post = (body: string) =>
  fetch(`${sigil.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' }, body });

describe('the forward step', () => {
  it("gives the engine the client's bytes with only the model value changed to the engine's name", async () => {
    const res = await post('{"model":"renamed","messages":[{"role":"user","content":"hi"}],"n":12345678901234567890}');
    expect(res.status).toBe(200);
    expect(engine.requests.at(-1)!.body.toString('utf8')).toBe(
      '{"model":"engine/renamed","messages":[{"role":"user","content":"hi"}],"n":12345678901234567890}',
    );
  });

  it('fails over to the next engine when one refuses the connection, and logs the one that answered', async () => {
    const from = sigil.logs.length;
    const res = await post('{"model":"m","messages":[{"role":"user","content":"hi"}]}');
    expect(res.status).toBe(200);
    const [line] = await requestLines(sigil, from);
    expect(line!.upstream).toBe('e');
  });

  it("salts the engine's prefix cache per API key where the upstream takes cache_salt", async () => {
    await post('{"model":"s","messages":[{"role":"user","content":"hi"}]}');
    const salted = JSON.parse(engine.requests.at(-1)!.body.toString('utf8')) as Record<string, unknown>;
    expect(salted.model).toBe('m');
    expect(typeof salted.cache_salt).toBe('string');
    await post('{"model":"s","messages":[{"role":"user","content":"hi"}]}');
    expect((JSON.parse(engine.requests.at(-1)!.body.toString('utf8')) as Record<string, unknown>).cache_salt).toBe(salted.cache_salt);
  });

  it("turns an engine's refusal into an upstream error with the catalogue's model name and the engine's Retry-After", async () => {
    engine.behaviour = { status: 429, retryAfter: '7', errorMessage: 'engine/renamed is overloaded' };
    const res = await post('{"model":"renamed","messages":[{"role":"user","content":"hi"}]}');
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('7');
    expect(await res.json()).toEqual({
      error: { message: 'renamed is overloaded', type: 'rate_limit_exceeded', param: null, code: 'upstream_rate_limited' },
    });
  });
});
