import { createHash } from 'node:crypto';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { splitReceiptStream } from '../../src/verify/index.ts';
import { expectVerifiedReceipt } from '../support/receipts.ts';
import { embeddingOf } from '../support/test-engine-endpoints.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { requestLines, startTestSigil, type TestSigil } from '../support/sigil.ts';

/** SPEC 2b / issue 16: completions, embeddings and responses through the same pipeline as chat. */
let engine: TestEngine;
let sigil: TestSigil;
let client: OpenAI;
const captured: Array<{ url: string; requestBytes: Buffer; response: Response }> = [];

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['gen', 'engine/embed', 'chat-only'] });
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'gen' }, { id: 'embed', upstream_model: 'engine/embed', endpoints: ['embeddings'] }, { id: 'chat-only', endpoints: ['chat'] }],
  });
  // What a client does to check receipts: keep the exact bytes it sent and a clone of what it got.
  const recording: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    captured.push({ url: String(input), requestBytes: Buffer.from(String(init?.body ?? '')), response: response.clone() });
    return response;
  };
  client = new OpenAI({
    baseURL: `${sigil.url}/v1`,
    apiKey: sigil.key,
    maxRetries: 0,
    fetch: recording,
    defaultHeaders: { 'x-service-receipt': 'true', 'x-service-nonce': 'n-16' },
  });
});

afterAll(async () => {
  await sigil.close();
  await engine.close();
});

const sha256 = (b: Buffer) => 'sha256:' + createHash('sha256').update(b).digest('hex');

/** Verifies the last exchange's message receipt as a client would: signature, nonce, measurement, policy and both hashes. */
async function verifyLast(stream: boolean, ending: 'done' | 'event' = 'done'): Promise<void> {
  const last = captured.at(-1)!;
  const body = Buffer.from(await last.response.arrayBuffer());
  let jws: string;
  let responseBytes: Uint8Array;
  if (stream) {
    const split = splitReceiptStream(body, { ending });
    jws = split.receipt;
    responseBytes = split.body;
  } else {
    jws = last.response.headers.get('x-service-receipt')!;
    responseBytes = body;
  }
  const { claims } = await expectVerifiedReceipt(sigil.url, jws, { nonce: 'n-16', requestBytes: last.requestBytes, responseBytes, receiptType: 'message' });
  expect(claims?.request_hash).toBe(sha256(last.requestBytes));
}

describe('POST /v1/completions', () => {
  it("JSON: the official client gets the engine's text and a verified receipt", async () => {
    const completion = await client.completions.create({ model: 'gen', prompt: 'say hi' });
    expect(completion.choices[0]?.text).toBe(engine.reply);
    expect(engine.requests.at(-1)!.path).toBe('/v1/completions');
    await verifyLast(false);
  });

  it('stream: the text chunks add up, [DONE] ends it, and the trailing receipt verifies over the exact bytes', async () => {
    let text = '';
    for await (const chunk of await client.completions.create({ model: 'gen', prompt: 'say hi', stream: true })) text += chunk.choices[0]?.text ?? '';
    expect(text).toBe(engine.reply);
    await verifyLast(true);
  });
});

describe('POST /v1/embeddings', () => {
  it('maps the model both ways and relays the vectors byte for byte, with a verified receipt', async () => {
    const result = await client.embeddings.create({ model: 'embed', input: ['alpha', 'beta'] });
    expect(result.data.map((d) => d.embedding)).toEqual([embeddingOf('alpha'), embeddingOf('beta')]);
    expect(result.model).toBe('embed');
    expect(JSON.parse(engine.requests.at(-1)!.body.toString()).model).toBe('engine/embed');
    await verifyLast(false);
  });
});

describe('POST /v1/responses', () => {
  it('JSON: output_text and a verified receipt', async () => {
    const response = await client.responses.create({ model: 'gen', input: 'say hi' });
    expect(response.output_text).toBe(engine.reply);
    await verifyLast(false);
  });

  it('stream: event: lines relayed exactly, complete without [DONE], the receipt after the last event', async () => {
    const types: string[] = [];
    for await (const event of await client.responses.create({ model: 'gen', input: 'say hi', stream: true })) types.push(event.type);
    expect(types.at(-1)).toBe('response.completed');
    const text = await captured.at(-1)!.response.clone().text();
    expect(text).toContain('event: response.completed\n');
    expect(text).not.toContain('[DONE]');
    expect(text).toMatch(/\n\n: receipt [\w-]+\.[\w-]+\.[\w-]+\n\n$/);
    await verifyLast(true, 'event');
  });
});

describe('the catalogue decides which endpoints a model serves', () => {
  it.each([
    [
      '/v1/chat/completions',
      { model: 'embed', messages: [{ role: 'user', content: 'hi' }] },
      "The model 'embed' is not served on /v1/chat/completions; it serves: embeddings.",
    ],
    ['/v1/embeddings', { model: 'gen', input: 'x' }, "The model 'gen' is not served on /v1/embeddings; it serves: chat, completions, responses."],
    ['/v1/responses', { model: 'chat-only', input: 'x' }, "The model 'chat-only' is not served on /v1/responses; it serves: chat."],
  ])('%s with a model that does not serve it: 400 model_not_supported, nothing forwarded', async (path, body, message) => {
    const before = engine.requests.length;
    const res = await fetch(`${sigil.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: { message, type: 'invalid_request_error', param: 'model', code: 'model_not_supported' } });
    expect(engine.requests.length).toBe(before);
  });
});

describe('logs and metrics', () => {
  it("are labelled by route, with each endpoint's usage", async () => {
    const from = sigil.logs.length;
    await client.embeddings.create({ model: 'embed', input: 'alpha' });
    await client.responses.create({ model: 'gen', input: 'say hi' });
    const lines = await requestLines(sigil, from, 2);
    expect(lines.map((l) => l.route)).toEqual(['/v1/embeddings', '/v1/responses']);
    expect(lines[0]!.usage).toMatchObject({ completion_tokens: 0 });
    expect((lines[1]!.usage as { completion_tokens: number }).completion_tokens).toBe(engine.reply.split(' ').length);
    const metrics = await (await fetch(`${sigil.url}/metrics`)).text();
    expect(metrics).toMatch(/sigil_requests_total\{route="\/v1\/embeddings",model="embed",status="200"\} \d+/);
    expect(metrics).toMatch(/sigil_requests_total\{route="\/v1\/responses",model="gen",status="200"\} \d+/);
  });
});
