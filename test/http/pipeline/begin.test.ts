import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../../support/sigil.ts';

let engine: TestEngine;
let sigil: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'm' }],
    config: { limits: { max_concurrent_per_key: 1 } },
  });
});

afterAll(async () => {
  await sigil.close(0);
  await engine.close();
});

afterEach(() => {
  engine.behaviour = {};
});

const chat = (headers: Record<string, string> = {}, stream = false, signal?: AbortSignal) =>
  fetch(`${sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream }),
    ...(signal === undefined ? {} : { signal }),
  });

describe('the begin step', () => {
  it('refuses a receipt header that is neither true nor false, and a nonce that is not printable ASCII', async () => {
    const yes = await chat({ 'x-service-receipt': 'yes' });
    expect(yes.status).toBe(400);
    expect(await yes.json()).toEqual({
      error: {
        message: 'The x-service-receipt header must be true or false.',
        type: 'invalid_request_error',
        param: 'x-service-receipt',
        code: 'invalid_value',
      },
    });
    const nonce = await chat({ 'x-service-nonce': 'x'.repeat(257) });
    expect(await nonce.json()).toEqual({
      error: {
        message: 'The x-service-nonce header must be 1 to 256 printable ASCII characters.',
        type: 'invalid_request_error',
        param: 'x-service-nonce',
        code: 'invalid_nonce',
      },
    });
  });

  it('cancels the engine request when the client leaves mid-stream, and frees the slot for the next request', async () => {
    engine.reply = Array.from({ length: 40 }, (_, i) => `w${i}`).join(' ');
    engine.behaviour = { chunkDelayMs: 100 };
    const leaving = new AbortController();
    const res = await chat({}, true, leaving.signal);
    expect(res.status).toBe(200);
    const aborted = engine.nextAbort();
    leaving.abort();
    await aborted;
    expect(engine.aborted).toBe(1);
    engine.behaviour = {};
    // One slot per key: the next request gets it only if the left exchange gave it back.
    const next = await chat();
    expect(next.status).toBe(200);
  });
});
