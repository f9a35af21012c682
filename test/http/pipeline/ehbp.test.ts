import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../../support/sigil.ts';

let engine: TestEngine;
let required: TestSigil;
let off: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  [required, off] = await Promise.all([
    startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }], config: { ehbp: { required: true } } }),
    startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }], config: { ehbp: { enabled: false } } }),
  ]);
});

afterAll(async () => {
  await Promise.all([required.close(0), off.close(0)]);
  await engine.close();
});

const chat = (s: TestSigil, headers: Record<string, string> = {}) =>
  fetch(`${s.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  });

describe('the EHBP step', () => {
  it('with ehbp.required, refuses a POST in the clear with 400 ehbp_required before the engine is asked', async () => {
    const res = await chat(required);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: {
        message: 'This service accepts only encrypted bodies (EHBP): encrypt the request to the key at /.well-known/hpke-keys.',
        type: 'invalid_request_error',
        param: 'Ehbp-Encapsulated-Key',
        code: 'ehbp_required',
      },
    });
    expect(engine.requests.filter((r) => r.method === 'POST')).toHaveLength(0);
  });

  it('with ehbp.required, still serves GETs (the documents a client needs to seal) in the clear', async () => {
    const models = await fetch(`${required.url}/v1/models`);
    expect(models.status).toBe(200);
    expect(models.headers.get('content-type')).toBe('application/json');
    expect((await fetch(`${required.url}/.well-known/hpke-keys`)).status).toBe(200);
  });

  it('with EHBP off, serves a POST in the clear whatever Ehbp-Encapsulated-Key it carries, and has no key to publish', async () => {
    const res = await chat(off, { 'ehbp-encapsulated-key': 'ab'.repeat(32) });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { object: string }).object).toBe('chat.completion');
    const keys = await fetch(`${off.url}/.well-known/hpke-keys`);
    expect(keys.status).toBe(404);
  });
});
