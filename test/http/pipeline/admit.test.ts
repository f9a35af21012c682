import { describe, expect, it } from 'vitest';
import { rawRequest } from '../../support/raw-http.ts';
import { engineAndSigil } from '../../support/engine-and-sigil.ts';
import { waitFor } from '../../support/wait-for.ts';

const served = engineAndSigil({
  modelNames: ['m'],
  models: [{ id: 'm' }],
  config: { limits: { requests_per_minute: 2, max_concurrent_per_key: 1, body_timeout_ms: 5000 } },
});

const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
const chat = (key: string) =>
  fetch(`${served.sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body,
  });
const rateHeaders = (res: Response) => [res.headers.get('x-ratelimit-limit'), res.headers.get('x-ratelimit-remaining')];

describe('the admit step', () => {
  it('takes no slot for a body still arriving: a slow sender does not hold the one slot of its key', async () => {
    const head = `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${served.sigil.otherKey}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`;
    const slow = rawRequest(served.sigil.url, [head, body.slice(0, 10)], { waitMs: 1500 });
    await waitFor('the slow request started', () => served.sigil.state.inFlight.count === 1);
    const meanwhile = await chat(served.sigil.otherKey);
    expect(meanwhile.status).toBe(200);
    await slow;
  });

  it('counts requests per key per minute, says so in x-ratelimit-* headers, and refuses the third with 429', async () => {
    const first = await chat(served.sigil.key);
    expect(first.status).toBe(200);
    expect(rateHeaders(first)).toEqual(['2', '1']);
    const second = await chat(served.sigil.key);
    expect(rateHeaders(second)).toEqual(['2', '0']);
    const posts = served.engine.requests.length;
    const third = await chat(served.sigil.key);
    expect(third.status).toBe(429);
    expect(rateHeaders(third)).toEqual(['2', '0']);
    expect(Number(third.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await third.json()).toEqual({
      error: { message: 'Rate limit reached: 2 requests per minute for this API key.', type: 'requests', param: null, code: 'rate_limit_exceeded' },
    });
    expect(served.engine.requests.length).toBe(posts);
  });
});
