import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { compactVerify, importJWK, type JWK } from 'jose';
import OpenAI from 'openai';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addKey } from '../../src/auth/keys-file.ts';
import { parseConfig } from '../../src/config/load.ts';
import { makeModel } from '../../packages/engine/src/model/make-model.ts';
import { startSigil, type RunningSigil } from '../../src/http/start.ts';
import { createLogger } from '../../src/logger/logger.ts';

/** Sigil's zero-config path for real: no upstream configured, so it runs the built-in llama.cpp engine. */
const SENTENCE = 'Receipts prove which enclave served you.';
const sha256 = (bytes: Buffer | string) => 'sha256:' + createHash('sha256').update(bytes).digest('hex');

let dir: string;
let sigil: RunningSigil;
let key: string;
let engineUrl: string;
let modelHash: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sigil-e2e-'));
  await makeModel({ out: join(dir, 'scripted.gguf'), scripted: SENTENCE });
  modelHash = sha256(readFileSync(join(dir, 'scripted.gguf')));
  const config = { listen: { host: '127.0.0.1', port: 0 }, auth: { keys_file: 'keys' }, engine: { model: 'scripted.gguf', parallel: 2, context_size: 512 } };
  writeFileSync(join(dir, 'sigil.yaml'), stringify(config));
  key = addKey(join(dir, 'keys')).key;
  const quiet = new Writable({ write: (_c, _e, done) => done() });
  sigil = await startSigil(parseConfig(stringify(config), join(dir, 'sigil.yaml')), { logger: createLogger('info', quiet) });
  engineUrl = sigil.state.ctx.config.upstreams.builtin!.url;
}, 120_000);

afterAll(async () => {
  await sigil?.close(0);
});

const client = () => new OpenAI({ baseURL: `${sigil.url}/v1`, apiKey: key, maxRetries: 0 });
const messages = [{ role: 'user' as const, content: 'Who served me?' }];

async function verify(jws: string): Promise<Record<string, unknown>> {
  const { keys } = (await (await fetch(`${sigil.url}/v1/verify/jwks.json`)).json()) as { keys: JWK[] };
  const { payload } = await compactVerify(jws, await importJWK(keys[0]!, 'ES256'), { algorithms: ['ES256'] });
  return JSON.parse(new TextDecoder().decode(payload));
}

describe('proxy in front of the built-in llama.cpp engine', () => {
  it('lists the model with the SHA-256 of its GGUF file as model_hash', async () => {
    const { data } = (await (await fetch(`${sigil.url}/v1/models?detail=true`)).json()) as { data: Array<Record<string, unknown>> };
    expect(data).toHaveLength(1);
    expect(data[0]).toMatchObject({ id: 'scripted', context_window: 512, provider: 'local', endpoints: ['chat', 'completions', 'embeddings', 'messages'] });
    const policy = (await (await fetch(`${sigil.url}/v1/verify/policy`)).json()) as { models: Array<{ model_hash: string }> };
    expect(policy.models[0]!.model_hash).toBe(modelHash);
  });

  it('serves embeddings from the same model, and answers /v1/responses (which the engine lacks) with a clear 400', async () => {
    const embedding = await client().embeddings.create({ model: 'scripted', input: ['Who served me?', 'Receipts'] });
    expect(embedding.data).toHaveLength(2);
    expect(embedding.data[0]!.embedding.length).toBeGreaterThan(8);
    expect(embedding.data[0]!.embedding.every((x) => Number.isFinite(x))).toBe(true);
    // OpenAI's embeddings usage: prompt and total tokens, no completion tokens.
    expect(Object.keys(embedding.usage).sort()).toEqual(['prompt_tokens', 'total_tokens']);
    expect(embedding.usage.total_tokens).toBe(embedding.usage.prompt_tokens);
    const error = await client()
      .responses.create({ model: 'scripted', input: 'Hi' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).code).toBe('model_not_supported');
  });

  it('answers the scripted sentence with finish_reason stop and the engine’s real token counts', async () => {
    const completion = await client().chat.completions.create({ model: 'scripted', messages, temperature: 0 });
    expect(completion.choices[0]!.message.content).toBe(SENTENCE);
    expect(completion.choices[0]!.finish_reason).toBe('stop');
    const direct = (await (
      await fetch(`${engineUrl}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'scripted', messages, temperature: 0 }),
      })
    ).json()) as { usage: unknown };
    expect(completion.usage).toEqual(direct.usage);
    expect(completion.usage!.completion_tokens).toBeGreaterThan(3);
  });

  it("a prompt over the context keeps the engine's OpenAI code context_length_exceeded", async () => {
    const error = await client()
      .chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'receipts '.repeat(600) }] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).code).toBe('context_length_exceeded');
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('messages');
    expect((error as Error).message).toContain('maximum context length is 512 tokens');
  });

  it('stops with finish_reason length when max_tokens cuts the answer', async () => {
    const completion = await client().chat.completions.create({ model: 'scripted', messages, temperature: 0, max_tokens: 3 });
    expect(completion.choices[0]!.finish_reason).toBe('length');
    expect(completion.usage!.completion_tokens).toBe(3);
    expect(SENTENCE.startsWith(completion.choices[0]!.message.content!)).toBe(true);
  });

  it('streams with a verifiable message receipt over the exact bytes', async () => {
    const body = JSON.stringify({ model: 'scripted', messages, temperature: 0, stream: true, stream_options: { include_usage: true } });
    const res = await fetch(`${sigil.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-service-receipt': 'true', 'x-service-nonce': 'e2e' },
      body,
    });
    const text = await res.text();
    const done = text.indexOf('data: [DONE]\n\n') + 'data: [DONE]\n\n'.length;
    const events = text
      .slice(0, done)
      .split('\n\n')
      .filter(Boolean)
      .slice(0, -1)
      .map((e) => JSON.parse(e.slice(6)));
    const content = events.map((e) => e.choices[0]?.delta?.content ?? '').join('');
    expect(content).toBe(SENTENCE);
    expect(events[0].choices[0].delta.role).toBe('assistant');
    expect(events.at(-2).choices[0].finish_reason).toBe('stop');
    // The stream's usage counts the same tokens as the JSON answer, end-of-turn token included.
    const json = await client().chat.completions.create({ model: 'scripted', messages, temperature: 0 });
    expect(events.at(-1).usage).toEqual(json.usage);
    const claims = await verify(text.slice(done + ': receipt '.length, -2));
    expect(claims).toMatchObject({
      receipt_type: 'message',
      nonce: 'e2e',
      tee: 'none',
      selected_model: { provider: 'local', model_id: 'scripted', model_hash: modelHash },
      completion_id: events[0].id,
      request_hash: sha256(body),
      response_hash: sha256(Buffer.from(text.slice(0, done))),
    });
  });

  it('decodes two streams at once, both to the end', async () => {
    const run = async () => {
      const stream = await client().chat.completions.create({ model: 'scripted', messages, temperature: 0, stream: true });
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
      return text;
    };
    expect(await Promise.all([run(), run()])).toEqual([SENTENCE, SENTENCE]);
  });

  it('frees the sequences of aborted streams: the next request is served', async () => {
    for (let i = 0; i < 2; i++) {
      const controller = new AbortController();
      const stream = await client().chat.completions.create({ model: 'scripted', messages, stream: true, max_tokens: 400 }, { signal: controller.signal });
      const iterator = stream[Symbol.asyncIterator]();
      await iterator.next();
      controller.abort();
    }
    const started = Date.now();
    const completion = await client().chat.completions.create({ model: 'scripted', messages, temperature: 0 });
    expect(completion.choices[0]!.message.content).toBe(SENTENCE);
    expect(Date.now() - started).toBeLessThan(5000);
  });
});
