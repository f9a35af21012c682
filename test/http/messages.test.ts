import { createHash } from 'node:crypto';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyExchange, type ServiceExchange } from '../../src/verify/exchange.ts';
import { canonicalPolicyHash } from '../../src/verify/index.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** Issue 50: Anthropic's Messages API through the same pipeline as chat, with its own errors and receipts that name it. */
let engine: TestEngine;
let sigil: TestSigil;
let client: Anthropic;
const captured: Array<{ url: string; requestBytes: Buffer; response: Response }> = [];

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['claude-local', 'engine/other'] });
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [
      { id: 'claude-local', endpoints: ['chat', 'messages', 'messages_count_tokens'] },
      { id: 'renamed', upstream_model: 'engine/other', endpoints: ['messages'] },
      { id: 'chat-only', endpoints: ['chat'] },
    ],
  });
  const recording: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    captured.push({ url: String(input), requestBytes: Buffer.from(String(init?.body ?? '')), response: response.clone() });
    return response;
  };
  client = new Anthropic({
    baseURL: sigil.url,
    apiKey: sigil.key,
    maxRetries: 0,
    fetch: recording,
    defaultHeaders: { 'x-service-receipt': 'true', 'x-service-nonce': 'n-50', 'anthropic-beta': 'tools-2024-04-04' },
  });
});

afterAll(async () => {
  await sigil.close();
  await engine.close();
});

const sha256 = (b: Buffer) => 'sha256:' + createHash('sha256').update(b).digest('hex');

/** The last exchange as a verifier sees it, checked against the served JWKS and policy; the failed checks' names. */
async function failedChecks(stream: boolean, path = '/v1/messages'): Promise<{ failed: string[]; endpoint: string | undefined }> {
  const last = captured.at(-1)!;
  const body = Buffer.from(await last.response.clone().arrayBuffer());
  const exchange: ServiceExchange = {
    path,
    stream,
    nonce: 'n-50',
    request: last.requestBytes,
    response: body,
    receiptHeader: last.response.headers.get('x-service-receipt') ?? undefined,
    receiptId: last.response.headers.get('x-service-receipt-id') ?? undefined,
  };
  const jwks = (await (await fetch(`${sigil.url}/v1/verify/jwks.json`)).json()) as { keys: unknown[] };
  const policy = await (await fetch(`${sigil.url}/v1/verify/policy`)).json();
  const result = await verifyExchange(exchange, {
    jwks,
    measurement: '0'.repeat(96),
    policy,
    policyHash: canonicalPolicyHash(policy),
    noHardwareEnclave: 'a test service',
  });
  return { failed: result.checks.filter((c) => !c.ok && c.waived === undefined).map((c) => c.name), endpoint: result.claims?.endpoint };
}

describe('POST /v1/messages', () => {
  it("JSON: the official Anthropic SDK gets the engine's message, and its receipt verifies over the exact bytes and names /v1/messages", async () => {
    const message = await client.messages.create({ model: 'claude-local', max_tokens: 64, messages: [{ role: 'user', content: 'say hi' }] });
    expect(message.content).toEqual([{ type: 'text', text: engine.reply }]);
    expect(message.usage).toEqual({ input_tokens: 2, output_tokens: 10 });
    const sent = engine.requests.at(-1)!;
    expect(sent.path).toBe('/v1/messages');
    expect(sent.headers['anthropic-version']).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(sent.headers['anthropic-beta']).toBe('tools-2024-04-04');
    expect(sent.headers['x-api-key']).toBeUndefined();
    expect(sent.body.equals(captured.at(-1)!.requestBytes)).toBe(true);
    expect(captured.at(-1)!.response.headers.get('request-id')).toMatch(/^[0-9a-f]{16}$/);
    expect(await failedChecks(false)).toEqual({ failed: [], endpoint: '/v1/messages' });
  });

  it('stream: every event type reaches the client unchanged and in order, and the receipt after message_stop verifies', async () => {
    const types: string[] = [];
    let text = '';
    const stream = await client.messages.create({ model: 'claude-local', max_tokens: 64, stream: true, messages: [{ role: 'user', content: 'say hi' }] });
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
    }
    expect(text).toBe(engine.reply);
    expect(types).toEqual([
      'message_start',
      'content_block_start',
      ...Array<string>(10).fill('content_block_delta'),
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    const body = Buffer.from(await captured.at(-1)!.response.clone().arrayBuffer()).toString('utf8');
    expect(body).toContain('event: ping\ndata: {"type":"ping"}\n\n');
    expect(body).toMatch(/event: message_stop\ndata: \{"type":"message_stop"\}\n\n: receipt [A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\n\n$/);
    expect(await failedChecks(true)).toEqual({ failed: [], endpoint: '/v1/messages' });
  });

  it("a Messages receipt does not pass as a chat completion's: the endpoint it names is checked", async () => {
    await client.messages.create({ model: 'claude-local', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] });
    expect((await failedChecks(false, '/v1/chat/completions')).failed).toEqual(['receipt.endpoint']);
  });

  it('the catalogue id goes back into the answer when the engine names the model otherwise, in JSON and in every stream event', async () => {
    const message = await client.messages.create({ model: 'renamed', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] });
    expect(message.model).toBe('renamed');
    expect(JSON.parse(engine.requests.at(-1)!.body.toString()).model).toBe('engine/other');
    const stream = await client.messages.create({ model: 'renamed', max_tokens: 8, stream: true, messages: [{ role: 'user', content: 'hi' }] });
    let started = '';
    for await (const event of stream) if (event.type === 'message_start') started = event.message.model;
    expect(started).toBe('renamed');
    expect(await failedChecks(true)).toEqual({ failed: [], endpoint: '/v1/messages' });
  });

  it('the key as Authorization: Bearer is accepted as well as x-api-key', async () => {
    const res = await fetch(`${sigil.url}/v1/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'claude-local', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { type: string }).type).toBe('message');
  });

  it("errors come in the Messages API's shape, with its types and a request-id header, and the SDK raises its own error classes", async () => {
    const before = engine.requests.length;
    const post = (body: unknown, headers: Record<string, string> = { 'x-api-key': sigil.key }) =>
      fetch(`${sigil.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    const noMax = await post({ model: 'claude-local', messages: [{ role: 'user', content: 'hi' }] });
    expect(noMax.status).toBe(400);
    const requestId = noMax.headers.get('request-id');
    expect(requestId).toMatch(/^[0-9a-f]{16}$/);
    expect(await noMax.json()).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: "Missing required parameter: 'max_tokens'.", code: 'missing_required_parameter' },
      request_id: requestId,
    });
    const badStream = await post({ model: 'claude-local', max_tokens: 8, stream: 'yes', messages: [] });
    expect(((await badStream.json()) as { error: { message: string } }).error.message).toBe("'stream' must be a boolean.");
    const notServed = await post({ model: 'chat-only', max_tokens: 8, messages: [] });
    expect(notServed.status).toBe(400);
    expect(((await notServed.json()) as { error: { code: string } }).error.code).toBe('model_not_supported');
    const unknown = await post({ model: 'nope', max_tokens: 8, messages: [] });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { type: string } }).error.type).toBe('not_found_error');
    const wrongKey = await post({ model: 'claude-local', max_tokens: 8, messages: [] }, { 'x-api-key': 'sk-wrong' });
    expect(wrongKey.status).toBe(401);
    expect(await wrongKey.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error', code: 'invalid_api_key' } });
    expect(engine.requests.length).toBe(before);

    const refused = await new Anthropic({ baseURL: sigil.url, apiKey: 'sk-wrong', maxRetries: 0 }).messages
      .create({ model: 'claude-local', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(Anthropic.AuthenticationError);
    expect((refused as InstanceType<typeof Anthropic.AuthenticationError>).requestID).toMatch(/^[0-9a-f]{16}$/);
  });

  it("an engine's refusal reaches the client in the Messages API's shape, with the engine's message", async () => {
    engine.behaviour = { status: 429, errorMessage: 'too busy', retryAfter: '3' };
    try {
      const res = await fetch(`${sigil.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': sigil.key },
        body: JSON.stringify({ model: 'claude-local', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBe('3');
      expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'rate_limit_error', message: 'too busy', code: 'upstream_rate_limited' } });
    } finally {
      engine.behaviour = {};
    }
  });

  it("a stream the engine breaks off ends with the Messages API's error event, and no receipt", async () => {
    engine.behaviour = { dropAfterEvents: 3 };
    try {
      const res = await fetch(`${sigil.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': sigil.key, 'x-service-receipt': 'true' },
        body: JSON.stringify({ model: 'claude-local', max_tokens: 8, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      });
      const body = await res.text();
      expect(
        body.endsWith(
          `event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: 'api_error', message: 'The engine connection failed before the stream finished.', code: 'upstream_bad_response' } })}\n\n`,
        ),
      ).toBe(true);
      expect(body).not.toContain(': receipt ');
    } finally {
      engine.behaviour = {};
    }
  });
});

describe('POST /v1/messages/count_tokens', () => {
  it("relays the engine's count for a model that declares it, with a receipt over the exact bytes", async () => {
    const counted = await client.messages.countTokens({ model: 'claude-local', messages: [{ role: 'user', content: 'one two three' }] });
    expect(counted).toEqual({ input_tokens: 3 });
    expect(engine.requests.at(-1)!.path).toBe('/v1/messages/count_tokens');
    const last = captured.at(-1)!;
    expect(sha256(last.requestBytes)).toMatch(/^sha256:/);
    expect(await failedChecks(false, '/v1/messages/count_tokens')).toEqual({ failed: [], endpoint: '/v1/messages/count_tokens' });
  });

  it('is refused for a model that does not declare it', async () => {
    const res = await fetch(`${sigil.url}/v1/messages/count_tokens`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': sigil.key },
      body: JSON.stringify({ model: 'renamed', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', code: 'model_not_supported' } });
  });
});
