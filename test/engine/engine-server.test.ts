import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeModel } from '../../packages/engine/src/model/make-model.ts';
import { startEngine, type RunningEngine } from '../../packages/engine/src/server/start-engine.ts';
import { waitFor } from '../support/wait-for.ts';

const SENTENCE = 'The quick brown fox jumps over the lazy dog.';
const USER = [{ role: 'user' as const, content: 'hi there' }];
/** `<s><|user|>hi there<|end|><|assistant|>`: BOS, <|user|>, "hi", "▁there", <|end|>, <|assistant|>. */
const USER_PROMPT_TOKENS = 6;

let dir: string;
let scriptedTokens: number[];
let scripted: RunningEngine;
/** One sequence and one queue place, on a random model: for abort and seed behaviour. */
let single: RunningEngine;
/** One sequence and no queue place: any request while it decodes is refused. */
let unqueued: RunningEngine;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sigil-engine-'));
  const made = await makeModel({ out: join(dir, 'scripted.gguf'), scripted: SENTENCE });
  scriptedTokens = made.scriptedTokens!;
  await makeModel({ out: join(dir, 'random.gguf'), seed: 5 });
  const common = { host: '127.0.0.1', port: 0, threads: 1 };
  scripted = await startEngine({ ...common, modelPath: join(dir, 'scripted.gguf'), parallel: 2, contextSize: 256, maxQueued: 4 });
  single = await startEngine({ ...common, modelPath: join(dir, 'random.gguf'), parallel: 1, contextSize: 4096, maxQueued: 1 });
  unqueued = await startEngine({ ...common, modelPath: join(dir, 'random.gguf'), parallel: 1, contextSize: 4096, maxQueued: 0 });
});

afterAll(async () => {
  await scripted?.close();
  await single?.close();
  await unqueued?.close();
  await rm(dir, { recursive: true, force: true });
});

const client = (engine: RunningEngine) => new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: 'unused', maxRetries: 0 });

const post = (engine: RunningEngine, body: unknown, init: RequestInit = {}) =>
  fetch(`${engine.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    ...init,
  });

describe('a scripted model behind the engine', () => {
  it('answers its sentence and stops on its end-of-turn token, whatever the prompt', async () => {
    for (const content of ['hi there', 'Write a poem about the sea, in French, at length.']) {
      const completion = await client(scripted).chat.completions.create({ model: 'anything', messages: [{ role: 'user', content }], temperature: 0 });
      expect(completion.model).toBe('scripted');
      expect(completion.object).toBe('chat.completion');
      expect(completion.choices).toEqual([{ index: 0, message: { role: 'assistant', content: SENTENCE }, logprobs: null, finish_reason: 'stop' }]);
      expect(completion.usage?.completion_tokens).toBe(scriptedTokens.length + 1);
    }
  });

  it('counts the real prompt tokens of the chat template', async () => {
    const completion = await client(scripted).chat.completions.create({ model: 'scripted', messages: USER, temperature: 0 });
    expect(completion.usage).toEqual({
      prompt_tokens: USER_PROMPT_TOKENS,
      completion_tokens: scriptedTokens.length + 1,
      total_tokens: USER_PROMPT_TOKENS + scriptedTokens.length + 1,
    });
  });

  it('streams the sentence: a role chunk, content deltas, a stop chunk, a usage chunk', async () => {
    const stream = await client(scripted).chat.completions.create({
      model: 'scripted',
      messages: USER,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0]!.choices[0]!.delta).toEqual({ role: 'assistant', content: '' });
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(SENTENCE);
    expect(chunks.at(-2)!.choices).toEqual([{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }]);
    expect(chunks.at(-1)!.choices).toEqual([]);
    expect(chunks.at(-1)!.usage).toEqual({
      prompt_tokens: USER_PROMPT_TOKENS,
      completion_tokens: scriptedTokens.length + 1,
      total_tokens: USER_PROMPT_TOKENS + scriptedTokens.length + 1,
    });
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
  });

  it("writes SSE in vLLM's byte format, ending with data: [DONE]", async () => {
    const text = await (await post(scripted, { messages: USER, temperature: 0, stream: true, max_tokens: 2 })).text();
    const events = text.split('\n\n');
    expect(events.at(-1)).toBe('');
    expect(events.at(-2)).toBe('data: [DONE]');
    expect(events.slice(0, -2).every((e) => e.startsWith('data: {') && !e.includes('\n'))).toBe(true);
    const bodies = events.slice(0, -2).map((e) => JSON.parse(e.slice('data: '.length)) as { choices: { delta: object; finish_reason: string | null }[] });
    expect(bodies.map((b) => b.choices[0])).toEqual([
      { index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null },
      { index: 0, delta: { content: 'The' }, logprobs: null, finish_reason: null },
      { index: 0, delta: { content: ' quick' }, logprobs: null, finish_reason: null },
      { index: 0, delta: {}, logprobs: null, finish_reason: 'length' },
    ]);
  });

  it('cuts at max_tokens with finish_reason length and exactly that many completion tokens', async () => {
    const completion = await client(scripted).chat.completions.create({ model: 'scripted', messages: USER, temperature: 0, max_tokens: 3 });
    expect(completion.choices[0]!.message.content).toBe('The quick brown');
    expect(completion.choices[0]!.finish_reason).toBe('length');
    expect(completion.usage?.completion_tokens).toBe(3);
  });

  it('stops before a stop sequence and leaves it out', async () => {
    const completion = await client(scripted).chat.completions.create({ model: 'scripted', messages: USER, temperature: 0, stop: [' fox'] });
    expect(completion.choices[0]!.message.content).toBe('The quick brown');
    expect(completion.choices[0]!.finish_reason).toBe('stop');
  });

  it('decodes two streams at once and completes both', async () => {
    const collect = async () => {
      const stream = await client(scripted).chat.completions.create({ model: 'scripted', messages: USER, temperature: 0, stream: true });
      let text = '';
      let finish: string | null = null;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? '';
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      return { text, finish };
    };
    expect(await Promise.all([collect(), collect()])).toEqual([
      { text: SENTENCE, finish: 'stop' },
      { text: SENTENCE, finish: 'stop' },
    ]);
  });

  it('lists its model with the context window', async () => {
    const res = await fetch(`${scripted.url}/v1/models`);
    const body = (await res.json()) as { object: string; data: Record<string, unknown>[] };
    expect(body.object).toBe('list');
    expect(body.data).toEqual([expect.objectContaining({ id: 'scripted', object: 'model', owned_by: 'sigil', max_model_len: 256 })]);
    expect(await (await fetch(`${scripted.url}/health`)).json()).toEqual({ status: 'ok' });
  });
});

describe('request errors, OpenAI-shaped', () => {
  const cases: [string, unknown, string | null, string][] = [
    ['bad JSON', '{"messages":', null, 'invalid_json'],
    ['no messages', { model: 'x' }, 'messages', 'invalid_request'],
    ['an unknown role', { messages: [{ role: 'wizard', content: 'x' }] }, 'messages[0].role', 'invalid_request'],
    ['temperature above 2', { messages: USER, temperature: 2.5 }, 'temperature', 'invalid_request'],
    ['max_tokens of 0', { messages: USER, max_tokens: 0 }, 'max_tokens', 'invalid_request'],
    ['a prompt longer than the context', { messages: [{ role: 'user', content: 'word '.repeat(400) }] }, 'messages', 'context_length_exceeded'],
    ['max_tokens past the context', { messages: USER, max_tokens: 251 }, 'messages', 'context_length_exceeded'],
  ];
  it.each(cases)('%s is a 400', async (_name, body, param, code) => {
    const res = await post(scripted, body);
    expect(res.status).toBe(400);
    const json = (await res.json()) as { error: Record<string, unknown> };
    expect(json.error).toEqual({ message: expect.any(String), type: 'invalid_request_error', param, code });
  });

  it('an unknown path is a 404 and a wrong method a 405', async () => {
    expect((await fetch(`${scripted.url}/v1/nothing`)).status).toBe(404);
    const res = await fetch(`${scripted.url}/v1/chat/completions`);
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('POST');
  });
});

describe('one sequence, a bounded queue', () => {
  const long = { messages: USER, max_tokens: 4000, temperature: 1, stream: true };

  /** Starts a long stream and resolves once its first content chunk arrived, so it holds the sequence. */
  async function startLongStream(engine: RunningEngine): Promise<{ abort(): void; done: Promise<unknown> }> {
    const aborter = new AbortController();
    const res = await post(engine, long, { signal: aborter.signal });
    const reader = res.body!.getReader();
    let seen = '';
    while (!seen.includes('"content"') || seen.split('data:').length < 3) seen += new TextDecoder().decode((await reader.read()).value);
    const done = (async () => {
      for (;;) if ((await reader.read()).done) return;
    })().catch(() => undefined);
    return { abort: () => aborter.abort(), done };
  }

  it('frees the sequence of an aborted stream at once: the next request is served promptly', async () => {
    const first = await startLongStream(single);
    first.abort();
    await first.done;
    const started = Date.now();
    const res = await post(single, { messages: USER, max_tokens: 5 });
    const body = (await res.json()) as { usage: { completion_tokens: number } };
    expect(res.status).toBe(200);
    expect(body.usage.completion_tokens).toBe(5);
    // 4000 tokens take several seconds here; an aborted stream must not hold the sequence that long.
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it('answers 429 when the sequence is busy and the queue is full, and serves again once it is free', async () => {
    const first = await startLongStream(unqueued);
    const res = await post(unqueued, { messages: USER, max_tokens: 1 });
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(((await res.json()) as { error: unknown }).error).toEqual({
      message: 'The engine is busy and its queue is full; retry shortly.',
      type: 'requests',
      param: null,
      code: 'rate_limit_exceeded',
    });
    first.abort();
    await first.done;
    const status = await waitFor('the slot of the aborted request freed', async () => {
      const answered = (await post(unqueued, { messages: USER, max_tokens: 1 })).status;
      return answered !== 429 && answered;
    });
    expect(status).toBe(200);
  });

  it('samples the same answer for the same seed and another for another seed or none', async () => {
    const ask = async (seed?: number) =>
      ((await (await post(single, { messages: USER, max_tokens: 12, temperature: 1, seed })).json()) as { choices: { message: { content: string } }[] })
        .choices[0]!.message.content;
    const [a, b, c, d, e] = [await ask(7), await ask(7), await ask(8), await ask(), await ask()];
    expect(a.length).toBeGreaterThan(0);
    expect(b).toBe(a);
    expect(c).not.toBe(a);
    expect(e).not.toBe(d);
  });
});
