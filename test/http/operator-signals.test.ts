import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { requestLines, startTestSigil, type TestSigil } from '../support/sigil.ts';

let engine: TestEngine;
let sigil: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({ upstreams: { main: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
});

afterAll(async () => {
  await sigil.close();
  await engine.close();
});

describe('what an operator sees in the log', () => {
  it("a 404 line shows the path's shape: Sigil's own words, anything else as *, no query", async () => {
    const before = sigil.logs.length;
    const res = await fetch(`${sigil.url}/v1/chat/completion/PATH-SECRET-2?token=QUERY-SECRET-1`);
    expect(res.status).toBe(404);
    const [line] = await requestLines(sigil, before);
    expect(line).toMatchObject({ route: 'unmatched', path: '/v1/chat/*/*', status: 404, error_code: 'not_found' });
    expect(sigil.logs.slice(before).join('\n')).not.toMatch(/QUERY-SECRET-1|PATH-SECRET-2|completion\//);
    const before2 = sigil.logs.length;
    await (await fetch(`${sigil.url}/v1/completions/`)).text();
    expect((await requestLines(sigil, before2))[0]).toMatchObject({ path: '/v1/completions/' });
  });

  it('a shutdown leaves a last line', async () => {
    const other = await startTestSigil({ upstreams: { main: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
    await other.close();
    const last = JSON.parse(other.logs.at(-1)!) as Record<string, unknown>;
    expect(last).toMatchObject({ level: 30, msg: 'sigil stopped', url: other.url });
  });
});

describe('the receipt header', () => {
  it.each(['yes', '1', 'on'])('X-Service-Receipt: %s is refused with a 400 naming the header, and nothing reaches the engine', async (value) => {
    const sent = engine.requests.length;
    const res = await fetch(`${sigil.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-service-receipt': value },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'Hi' }] }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: {
        message: 'The x-service-receipt header must be true or false.',
        type: 'invalid_request_error',
        param: 'x-service-receipt',
        code: 'invalid_value',
      },
    });
    expect(engine.requests.length).toBe(sent);
  });

  it('X-Service-Receipt: false is a request without a receipt', async () => {
    const res = await fetch(`${sigil.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-service-receipt': 'false' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'Hi' }] }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-service-receipt')).toBeNull();
  });
});
