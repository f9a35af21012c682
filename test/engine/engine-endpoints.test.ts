import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeModel } from '../../packages/engine/src/model/make-model.ts';
import { startEngine, type RunningEngine } from '../../packages/engine/src/server/start-engine.ts';

const SENTENCE = 'The quick brown fox jumps over the lazy dog.';
/** A raw prompt in the model's chat format, special tokens written out: the scripted chain starts after <|assistant|>. */
const PROMPT = '<|user|>hi there<|end|><|assistant|>';

let dir: string;
let engine: RunningEngine;
let client: OpenAI;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sigil-engine-endpoints-'));
  await makeModel({ out: join(dir, 'scripted.gguf'), scripted: SENTENCE });
  engine = await startEngine({ host: '127.0.0.1', port: 0, threads: 1, modelPath: join(dir, 'scripted.gguf'), parallel: 2, contextSize: 256, maxQueued: 4 });
  client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});

afterAll(async () => {
  await engine?.close();
  await rm(dir, { recursive: true, force: true });
});

const post = (path: string, body: unknown) =>
  fetch(`${engine.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('POST /v1/completions on the built-in engine', () => {
  it('completes a plain prompt with the scripted sentence, vLLM-shaped, counting BOS and the prompt tokens', async () => {
    const completion = await client.completions.create({ model: 'scripted', prompt: PROMPT, max_tokens: 64 });
    expect(completion.object).toBe('text_completion');
    expect(completion.id).toMatch(/^cmpl-[0-9a-f]{32}$/);
    expect(completion.choices).toEqual([{ index: 0, text: SENTENCE, logprobs: null, finish_reason: 'stop', stop_reason: null }]);
    // BOS, <|user|>, "hi", "▁there", <|end|>, <|assistant|>: special tokens in the text are read as such.
    expect(completion.usage?.prompt_tokens).toBe(6);
    expect(completion.usage?.total_tokens).toBe(6 + completion.usage!.completion_tokens);
  });

  it('streams text chunks that add up to the sentence, then a finish chunk, a usage chunk and [DONE]', async () => {
    const stream = await client.completions.create({
      model: 'scripted',
      prompt: PROMPT,
      max_tokens: 64,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    const finishes: Array<string | null> = [];
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      expect(chunk.object).toBe('text_completion');
      for (const choice of chunk.choices) {
        text += choice.text;
        finishes.push(choice.finish_reason);
      }
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe(SENTENCE);
    expect(finishes.at(-1)).toBe('stop');
    expect(finishes.slice(0, -1).every((f) => f === null)).toBe(true);
    expect(usage?.prompt_tokens).toBe(6);
    const raw = await (await post('/v1/completions', { prompt: 'hi', max_tokens: 3, stream: true })).text();
    expect(raw.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it('cuts at max_tokens with finish_reason length', async () => {
    // After <|assistant|> the scripted model writes the whole sentence, so two tokens can only end by length.
    const cut = await client.completions.create({ model: 'scripted', prompt: PROMPT, max_tokens: 2 });
    expect(cut.choices[0]?.finish_reason).toBe('length');
    expect(cut.usage?.completion_tokens).toBe(2);
  });

  it.each([
    [{ prompt: 42 }, 'prompt'],
    [{ prompt: ['a', 'b'] }, 'prompt'],
    [{ prompt: 'x', echo: true }, 'echo'],
    [{ prompt: 'x', n: 2 }, 'n'],
    [{ prompt: 'x', max_tokens: 0 }, 'max_tokens'],
  ])('refuses %j with a 400 naming %s', async (body, param) => {
    const res = await post('/v1/completions', body);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { param: string; type: string } }).error).toMatchObject({ param, type: 'invalid_request_error' });
  });
});

describe('POST /v1/embeddings on the built-in engine', () => {
  it('embeds each input through the official client (base64 on the wire), the same text to the same vector', async () => {
    const result = await client.embeddings.create({ model: 'scripted', input: ['hello world', 'the lazy dog', 'hello world'] });
    expect(result.object).toBe('list');
    expect(result.data.map((d) => d.index)).toEqual([0, 1, 2]);
    const [a, b, c] = result.data.map((d) => d.embedding);
    expect(a!.length).toBeGreaterThan(0);
    expect(a!.every(Number.isFinite)).toBe(true);
    expect(c).toEqual(a);
    expect(b).not.toEqual(a);
    expect(result.usage.prompt_tokens).toBe(result.usage.total_tokens);
    expect(result.usage.prompt_tokens).toBeGreaterThan(0);
  });

  it('answers floats by default and the same vector as base64 little-endian float32 on request', async () => {
    const floats = (await (await post('/v1/embeddings', { input: 'hello world' })).json()) as { data: Array<{ embedding: number[] }> };
    const encoded = (await (await post('/v1/embeddings', { input: 'hello world', encoding_format: 'base64' })).json()) as {
      data: Array<{ embedding: string }>;
    };
    const bytes = Buffer.from(encoded.data[0]!.embedding, 'base64');
    const decoded = Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4));
    expect(decoded).toEqual(floats.data[0]!.embedding.map((v) => Math.fround(v)));
  });

  it.each([[{ input: '' }], [{ input: [] }], [{ input: { text: 'x' } }], [{ input: 'x', encoding_format: 'hex' }], [{ input: 'x', dimensions: 8 }]])(
    'refuses %j with a 400',
    async (body) => {
      const res = await post('/v1/embeddings', body);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { type: string } }).error.type).toBe('invalid_request_error');
    },
  );
});
