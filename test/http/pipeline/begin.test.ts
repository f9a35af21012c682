import { afterEach, describe, expect, it } from 'vitest';
import { engineAndSigil } from '../../support/engine-and-sigil.ts';

const served = engineAndSigil({
  modelNames: ['m'],
  models: [{ id: 'm' }],
  config: { limits: { max_concurrent_per_key: 1 } },
});

afterEach(() => {
  served.engine.behaviour = {};
});

const chat = (headers: Record<string, string> = {}, stream = false, signal?: AbortSignal) =>
  fetch(`${served.sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${served.sigil.key}`, 'content-type': 'application/json', ...headers },
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
    served.engine.reply = Array.from({ length: 40 }, (_, i) => `w${i}`).join(' ');
    served.engine.behaviour = { chunkDelayMs: 100 };
    const leaving = new AbortController();
    const res = await chat({}, true, leaving.signal);
    expect(res.status).toBe(200);
    const aborted = served.engine.nextAbort();
    leaving.abort();
    await aborted;
    expect(served.engine.aborted).toBe(1);
    served.engine.behaviour = {};
    // One slot per key: the next request gets it only if the left exchange gave it back.
    const next = await chat();
    expect(next.status).toBe(200);
  });
});
