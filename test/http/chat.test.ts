import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

let vllm: TestEngine;
let llamacpp: TestEngine;
let sigil: TestSigil;

beforeAll(async () => {
  vllm = await startTestEngine({ format: 'vllm', modelNames: ['same-name', 'engine/renamed'] });
  llamacpp = await startTestEngine({ format: 'llamacpp', modelNames: ['gguf-model'] });
  sigil = await startTestSigil({
    upstreams: {
      vllm: { url: vllm.baseUrl, timeout_ms: 2000, idle_timeout_ms: 1000 },
      llamacpp: { url: llamacpp.baseUrl },
    },
    models: [
      { id: 'same-name', upstream: 'vllm' },
      { id: 'renamed', upstream_model: 'engine/renamed', upstream: 'vllm' },
      { id: 'gguf-model', upstream: 'llamacpp' },
    ],
  });
});

afterAll(async () => {
  await sigil.close();
  await vllm.close();
  await llamacpp.close();
});

afterEach(() => {
  vllm.behaviour = {};
  llamacpp.behaviour = {};
});

const client = () => new OpenAI({ baseURL: `${sigil.url}/v1`, apiKey: sigil.key, maxRetries: 0 });

async function post(body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** Asks the engine directly, for the bytes Sigil must reproduce. */
async function direct(engine: TestEngine, body: unknown): Promise<string> {
  const res = await fetch(`${engine.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return res.text();
}

const chatBody = { model: 'same-name', messages: [{ role: 'user', content: 'Say hello' }] };
const stripIds = (text: string) => text.replace(/chatcmpl-[0-9a-f]+/g, 'ID').replace(/"created":\d+/g, '"created":0');

describe('chat completions through the official openai client', () => {
  it('returns the engine JSON completion with usage', async () => {
    const completion = await client().chat.completions.create({ model: 'same-name', messages: [{ role: 'user', content: 'Say hello' }] });
    expect(completion.object).toBe('chat.completion');
    expect(completion.model).toBe('same-name');
    expect(completion.choices[0]!.message).toMatchObject({ role: 'assistant', content: vllm.reply });
    expect(completion.choices[0]!.finish_reason).toBe('stop');
    expect(completion.usage).toEqual({ prompt_tokens: 2, completion_tokens: 10, total_tokens: 12 });
  });

  it('streams every chunk with the same id, role first, finish_reason last, usage when asked', async () => {
    const stream = await client().chat.completions.create({
      model: 'same-name',
      messages: [{ role: 'user', content: 'Say hello' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks).toHaveLength(13);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.model === 'same-name')).toBe(true);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    expect(
      chunks
        .slice(1, 11)
        .map((c) => c.choices[0]!.delta.content)
        .join(''),
    ).toBe(vllm.reply);
    expect(chunks[11]!.choices[0]).toMatchObject({ delta: {}, finish_reason: 'stop' });
    expect(chunks[12]!.usage).toEqual({ prompt_tokens: 2, completion_tokens: 10, total_tokens: 12 });
  });

  it('maps the catalogue id to the engine name and back, in JSON and in every stream chunk', async () => {
    const completion = await client().chat.completions.create({ model: 'renamed', messages: [{ role: 'user', content: 'hi' }] });
    expect(completion.model).toBe('renamed');
    expect(JSON.parse(vllm.requests.at(-1)!.body.toString()).model).toBe('engine/renamed');

    const stream = await client().chat.completions.create({ model: 'renamed', messages: [{ role: 'user', content: 'hi' }], stream: true });
    const models = [];
    for await (const chunk of stream) models.push(chunk.model);
    expect(models).toEqual(Array(12).fill('renamed'));
  });

  it('lists the catalogue through the client', async () => {
    const page = await client().models.list();
    expect(page.data.map((m) => m.id)).toEqual(['same-name', 'renamed', 'gguf-model']);
  });
});

describe('bytes are relayed unchanged when names are equal', () => {
  it('forwards the exact request bytes and returns the engine JSON byte for byte', async () => {
    const raw = '{ "model":"same-name",  "messages":[{"role":"user","content":"Say hello"}], "top_p": 0.5, "seed": 7 }';
    const res = await post(raw);
    expect(res.status).toBe(200);
    expect(vllm.requests.at(-1)!.body.toString()).toBe(raw);
    expect(stripIds(await res.text())).toBe(stripIds(await direct(vllm, chatBody)));
  });

  it.each([
    ['vllm', 'same-name'],
    ['llamacpp', 'gguf-model'],
  ] as const)('relays a %s stream byte for byte', async (name, model) => {
    const engine = name === 'vllm' ? vllm : llamacpp;
    const body = { model, messages: [{ role: 'user', content: 'Say hello' }], stream: true, stream_options: { include_usage: true } };
    const res = await post(body);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const text = await res.text();
    expect(stripIds(text)).toBe(stripIds(await direct(engine, body)));
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it('removes the region extension before forwarding and forwards other fields untouched', async () => {
    await post({ ...chatBody, region: 'eu-west', top_p: 0.9, stop: ['x'], seed: 1, tools: [] });
    const forwarded = JSON.parse(vllm.requests.at(-1)!.body.toString());
    expect(forwarded).toEqual({ model: 'same-name', messages: chatBody.messages, top_p: 0.9, stop: ['x'], seed: 1, tools: [] });
  });

  it('passes content-part arrays and tool messages through untouched', async () => {
    const messages = [
      { role: 'user', content: [{ type: 'text', text: 'What is in this picture?' }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'look', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'a cat' },
    ];
    const res = await post({ model: 'same-name', messages });
    expect(res.status).toBe(200);
    expect(JSON.parse(vllm.requests.at(-1)!.body.toString()).messages).toEqual(messages);
  });

  it('serves a region no upstream has from the model’s first upstream when regions are not strict', async () => {
    const res = await post({ ...chatBody, region: 'mars' });
    expect(res.status).toBe(200);
    expect(JSON.parse(vllm.requests.at(-1)!.body.toString())).toEqual(chatBody);
  });

  it('forwards a deeply nested body with its region removed, every other byte as sent (an edit, not a re-serialisation)', async () => {
    const deep = '['.repeat(5000) + ']'.repeat(5000);
    const res = await post(`{"model":"same-name","messages":[{"role":"user","content":"hi"}],"region":"eu-west","metadata":${deep}}`);
    expect(res.status).toBe(200);
    expect(vllm.requests.at(-1)!.body.toString('utf8')).toBe(`{"model":"same-name","messages":[{"role":"user","content":"hi"}],"metadata":${deep}}`);
  });

  it('never forwards the client Authorization header to the engine', async () => {
    await post(chatBody);
    expect(vllm.requests.at(-1)!.headers.authorization).toBeUndefined();
  });
});

describe('streams are not buffered', () => {
  it('delivers each engine chunk when the engine sends it', async () => {
    vllm.behaviour = { chunkDelayMs: 150 };
    const res = await post({ ...chatBody, stream: true });
    const reader = res.body!.getReader();
    const arrivals: number[] = [];
    const start = Date.now();
    let text = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += Buffer.from(value).toString();
      arrivals.push(Date.now() - start);
    }
    const events = text.split('\n\n').filter(Boolean);
    expect(events).toHaveLength(13);
    // 12 events 150 ms apart: if Sigil buffered, they would arrive together at the end.
    expect(arrivals.length).toBeGreaterThanOrEqual(12);
    expect(arrivals[0]!).toBeLessThan(120);
    expect(arrivals[5]! - arrivals[0]!).toBeGreaterThan(500);
  });

  it('aborts the engine request when the client disconnects, without waiting for the engine to write again', async () => {
    // The engine's next event would come in a minute, past the test's time: only an abort on the client's
    // leaving (not a failed write of the next event) can end the engine request before the test gives up.
    vllm.behaviour = { chunkDelayMs: 60_000 };
    const aborted = vllm.nextAbort();
    const res = await post({ ...chatBody, stream: true });
    const reader = res.body!.getReader();
    await reader.read();
    const before = vllm.aborted;
    await reader.cancel();
    await aborted;
    expect(vllm.aborted).toBe(before + 1);
  });
});

describe('engine failures', () => {
  it('passes an engine 4xx on with its status in the OpenAI error shape', async () => {
    const res = await post({ ...chatBody, max_tokens: 5000 });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: {
        message: "This model's maximum context length is 4096 tokens. However, you requested 5002 tokens.",
        type: 'invalid_request_error',
        param: null,
        code: 'upstream_bad_request',
      },
    });
  });

  it("names the catalogue's model, never the engine's internal name, in an engine refusal", async () => {
    vllm.behaviour = { status: 404, errorMessage: 'The model `engine/renamed` does not exist.' };
    const missing = await post({ ...chatBody, model: 'renamed' });
    expect(missing.status).toBe(404);
    expect((await missing.json()).error).toEqual({
      message: 'The model `renamed` does not exist.',
      type: 'invalid_request_error',
      param: null,
      code: 'upstream_not_found',
    });
  });

  it('passes an engine 429 on as upstream_rate_limited with its Retry-After, and an engine 404 as upstream_not_found', async () => {
    vllm.behaviour = { status: 429, retryAfter: '7' };
    const limited = await post(chatBody);
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('7');
    expect(await limited.json()).toEqual({ error: { message: 'engine says 429', type: 'requests', param: null, code: 'upstream_rate_limited' } });
    vllm.behaviour = { status: 404 };
    const missing = await post(chatBody);
    expect(missing.status).toBe(404);
    expect((await missing.json()).error).toEqual({ message: 'engine says 404', type: 'invalid_request_error', param: null, code: 'upstream_not_found' });
  });

  it("answers 400 upstream_bad_request for an engine 4xx the catalogue does not name, never the engine's own status", async () => {
    vllm.behaviour = { status: 418 };
    const res = await post(chatBody);
    expect(res.status).toBe(400);
    expect((await res.json()).error.code).toBe('upstream_bad_request');
  });

  it('answers 502 upstream_server_error when the engine answers 500', async () => {
    vllm.behaviour = { status: 500 };
    const res = await post(chatBody);
    expect(res.status).toBe(502);
    expect(await res.json()).toEqual({
      error: { message: 'The engine failed with status 500.', type: 'upstream_error', param: null, code: 'upstream_server_error' },
    });
  });

  it('answers 502 upstream_bad_response when the engine sends invalid JSON', async () => {
    vllm.behaviour = { invalidJson: true };
    const res = await post(chatBody);
    expect(res.status).toBe(502);
    expect((await res.json()).error).toEqual({
      message: 'The engine sent a response that is not valid JSON.',
      type: 'upstream_error',
      param: null,
      code: 'upstream_bad_response',
    });
  });

  it('answers 504 upstream_timeout when the engine is slower than timeout_ms', async () => {
    vllm.behaviour = { firstByteDelayMs: 3000 };
    const res = await post(chatBody);
    expect(res.status).toBe(504);
    expect((await res.json()).error).toEqual({ message: 'The engine did not answer in time.', type: 'upstream_error', param: null, code: 'upstream_timeout' });
  });

  it('ends a stream the engine drops with one error event and no [DONE]', async () => {
    vllm.behaviour = { dropAfterEvents: 3 };
    const res = await post({ ...chatBody, stream: true });
    expect(res.status).toBe(200);
    const events = (await res.text()).split('\n\n').filter(Boolean);
    expect(events).toHaveLength(4);
    expect(JSON.parse(events[3]!.slice('data: '.length))).toEqual({
      error: { message: 'The engine connection failed before the stream finished.', type: 'upstream_error', param: null, code: 'upstream_bad_response' },
    });
    expect(events.some((e) => e.includes('[DONE]'))).toBe(false);
  });

  it('treats a stream that ends without [DONE] as failed', async () => {
    vllm.behaviour = { omitDone: true };
    const events = (await (await post({ ...chatBody, stream: true })).text()).split('\n\n').filter(Boolean);
    expect(events.at(-1)).toBe(
      'data: {"error":{"message":"The engine ended the stream before it finished.","type":"upstream_error","param":null,"code":"upstream_bad_response"}}',
    );
  });

  it('ends a stream whose engine goes silent past idle_timeout_ms with a timeout event', async () => {
    // Three times the idle timeout: at 1.5 times, a busy machine that read a chunk half a second late missed the timeout.
    vllm.behaviour = { chunkDelayMs: 3000 };
    const events = (await (await post({ ...chatBody, stream: true })).text()).split('\n\n').filter(Boolean);
    expect(events).toHaveLength(2);
    expect(JSON.parse(events[1]!.slice(6)).error.code).toBe('upstream_timeout');
  });
});
