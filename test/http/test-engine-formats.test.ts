import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { embeddingOf } from '../support/test-engine-endpoints.ts';

// The test engine stands in for vLLM on every endpoint Sigil relays: the official client must read it as it reads vLLM.
let engine: TestEngine;
let client: OpenAI;

beforeAll(async () => {
  engine = await startTestEngine();
  client = new OpenAI({ baseURL: engine.baseUrl, apiKey: 'unused', maxRetries: 0 });
});
afterAll(() => engine.close());

describe('the test engine speaks vLLM on every endpoint', () => {
  it('completions: JSON and stream give the reply, with usage', async () => {
    const json = await client.completions.create({ model: 'test-model', prompt: 'say hi' });
    expect(json.choices[0]?.text).toBe(engine.reply);
    expect(json.usage).toMatchObject({ prompt_tokens: 2, completion_tokens: engine.reply.split(' ').length });
    let text = '';
    for await (const chunk of await client.completions.create({ model: 'test-model', prompt: 'say hi', stream: true })) text += chunk.choices[0]?.text ?? '';
    expect(text).toBe(engine.reply);
  });

  it('embeddings: the SDK decodes the base64 vectors it asked for', async () => {
    const result = await client.embeddings.create({ model: 'test-model', input: ['alpha', 'beta'] });
    expect(result.data.map((d) => d.embedding)).toEqual([embeddingOf('alpha'), embeddingOf('beta')]);
  });

  it('responses: JSON output_text, and a stream of typed events ending with response.completed and no [DONE]', async () => {
    const response = await client.responses.create({ model: 'test-model', input: 'say hi' });
    expect(response.output_text).toBe(engine.reply);
    const types: string[] = [];
    let text = '';
    for await (const event of await client.responses.create({ model: 'test-model', input: 'say hi', stream: true })) {
      types.push(event.type);
      if (event.type === 'response.output_text.delta') text += event.delta;
    }
    expect(text).toBe(engine.reply);
    expect(types[0]).toBe('response.created');
    expect(types.at(-1)).toBe('response.completed');
    const raw = await (
      await fetch(`${engine.baseUrl}/responses`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'test-model', input: 'x', stream: true }),
      })
    ).text();
    expect(raw.startsWith('event: response.created\ndata: {')).toBe(true);
    expect(raw).not.toContain('[DONE]');
  });
});
