import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeModel } from '../../packages/engine/src/model/make-model.ts';
import { startEngine, type RunningEngine } from '../../packages/engine/src/server/start-engine.ts';

/** Repeated words, a repeated piece inside words, accents and a 4-byte emoji spelled as byte tokens. */
const SENTENCE = 'Grüße! The cat saw the other cat, then the 🦙 saw the cat.';

let dir: string;
let engine: RunningEngine;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sigil-make-model-'));
  await makeModel({ out: join(dir, 'llama-cat.gguf'), scripted: SENTENCE, seed: 9 });
  engine = await startEngine({ modelPath: join(dir, 'llama-cat.gguf'), host: '127.0.0.1', port: 0, parallel: 1, threads: 1, contextSize: 128, maxQueued: 0 });
});

afterAll(async () => {
  await engine?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('sigil engine make-model --scripted', () => {
  it('answers a sentence with repeated tokens and multi-byte characters exactly, streamed or not', async () => {
    const client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const messages = [
      { role: 'system' as const, content: 'Be brief.' },
      { role: 'user' as const, content: 'What happened?' },
    ];
    const completion = await client.chat.completions.create({ model: 'm', messages, temperature: 0 });
    expect(completion.choices[0]!.message.content).toBe(SENTENCE);
    expect(completion.choices[0]!.finish_reason).toBe('stop');
    const stream = await client.chat.completions.create({ model: 'm', messages, temperature: 0, stream: true });
    const deltas: string[] = [];
    for await (const chunk of stream) deltas.push(chunk.choices[0]?.delta.content ?? '');
    expect(deltas.join('')).toBe(SENTENCE);
    expect(deltas.some((d) => d.includes('\uFFFD'))).toBe(false);
  });

  it('refuses a sentence that repeats a piece more often than it can be respelled', async () => {
    await expect(makeModel({ out: join(dir, 'never.gguf'), scripted: 'a a a a a a a a a a a a' })).rejects.toThrow(
      /repeats more often than it can be respelled/,
    );
  });
});
