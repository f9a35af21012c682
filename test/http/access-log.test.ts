import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { requestLines, startTestSigil, type TestSigil } from '../support/sigil.ts';

let engine: TestEngine;
let sigil: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  engine.reply = 'COMPLETION-SECRET-7f3a appears only in the answer.';
  sigil = await startTestSigil({ upstreams: { main: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
});

afterAll(async () => {
  await sigil.close();
  await engine.close();
});

const PROMPT = 'PROMPT-SECRET-91c2 must never be logged';

async function chat(stream: boolean, key = sigil.key) {
  const res = await fetch(`${sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-service-receipt': 'true', 'x-service-nonce': 'NONCE-SECRET-55' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: PROMPT }], stream, stream_options: stream ? { include_usage: true } : undefined }),
  });
  return res.text();
}

describe('the request log', () => {
  it('writes one line per request with id, route, status, latency, model and token usage', async () => {
    const before = sigil.logs.length;
    await chat(false);
    const lines = await requestLines(sigil, before);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 30,
      service: 'sigil',
      request_id: expect.stringMatching(/^[0-9a-f]{16}$/),
      method: 'POST',
      route: '/v1/chat/completions',
      status: 200,
      model: 'm',
      stream: false,
      receipt: true,
      usage: { prompt_tokens: 5, completion_tokens: 6 },
      latency_ms: expect.any(Number),
    });
  });

  it('records the usage of a stream from its usage chunk', async () => {
    const before = sigil.logs.length;
    await chat(true);
    const [line] = await requestLines(sigil, before);
    expect(line).toMatchObject({ status: 200, stream: true, usage: { prompt_tokens: 5, completion_tokens: 6 } });
  });

  it('never contains prompts, completions, nonces or API keys', async () => {
    const before = sigil.logs.length;
    await chat(false);
    await chat(true);
    await chat(false, 'sk-sigil-WRONG-KEY-SECRET');
    expect(await requestLines(sigil, before, 3)).toHaveLength(3);
    const all = sigil.logs.join('\n');
    expect(all).toContain('"route":"/v1/chat/completions"');
    for (const secret of ['PROMPT-SECRET', 'COMPLETION-SECRET', 'NONCE-SECRET', 'WRONG-KEY-SECRET', sigil.key, sigil.key.slice(9, 30)]) {
      expect(all).not.toContain(secret);
    }
  });
});
