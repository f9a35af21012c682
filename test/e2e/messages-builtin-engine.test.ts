import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { createAnthropic } from '@ai-sdk/anthropic';
import Anthropic from '@anthropic-ai/sdk';
import { generateText, streamText } from 'ai';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addKey } from '../../src/auth/keys-file.ts';
import { parseConfig } from '../../src/config/load.ts';
import { makeModel } from '../../packages/engine/src/model/make-model.ts';
import { startSigil, type RunningSigil } from '../../src/http/start.ts';
import { createLogger } from '../../src/logger/logger.ts';
import { verifyExchange } from '../../src/verify/exchange.ts';
import { canonicalPolicyHash } from '../../src/verify/index.ts';
import { startConnect, type RunningConnect } from '../../src/connect/start.ts';
import { startForgingProxy, type ForgingProxy } from '../support/forging-proxy.ts';

/** Issue 50: the zero-config start (the built-in llama.cpp engine) answers Anthropic's clients, with verified receipts. */
const SENTENCE = 'Receipts prove which enclave served you.';
const WEATHER = {
  name: 'get_weather',
  description: 'The weather now in a city',
  input_schema: {
    type: 'object' as const,
    properties: { city: { type: 'string', enum: ['Paris', 'Lyon'] }, metric: { type: 'boolean' } },
    required: ['city', 'metric'],
  },
};

let sigil: RunningSigil;
let key: string;
let client: Anthropic;
const captured: Array<{ request: Buffer; response: Response; path: string }> = [];

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sigil-e2e-messages-'));
  await makeModel({ out: join(dir, 'scripted.gguf'), scripted: SENTENCE });
  const config = { listen: { host: '127.0.0.1', port: 0 }, auth: { keys_file: 'keys' }, engine: { model: 'scripted.gguf', parallel: 2, context_size: 512 } };
  writeFileSync(join(dir, 'sigil.yaml'), stringify(config));
  key = addKey(join(dir, 'keys')).key;
  const quiet = new Writable({ write: (_c, _e, done) => done() });
  sigil = await startSigil(parseConfig(stringify(config), join(dir, 'sigil.yaml')), { logger: createLogger('info', quiet) });
  const recording: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    captured.push({ request: Buffer.from(String(init?.body ?? '')), response: response.clone(), path: new URL(String(input)).pathname });
    return response;
  };
  client = new Anthropic({ baseURL: sigil.url, apiKey: key, maxRetries: 0, fetch: recording, defaultHeaders: { 'x-service-receipt': 'true' } });
}, 120_000);

afterAll(async () => {
  await sigil?.close(0);
});

/** The last exchange's receipts checked as a client would; the names of the checks that failed. */
async function failedChecks(stream: boolean): Promise<string[]> {
  const last = captured.at(-1)!;
  const jwks = (await (await fetch(`${sigil.url}/v1/verify/jwks.json`)).json()) as { keys: unknown[] };
  const policy = await (await fetch(`${sigil.url}/v1/verify/policy`)).json();
  const { checks } = await verifyExchange(
    {
      path: last.path,
      stream,
      nonce: '',
      request: last.request,
      response: Buffer.from(await last.response.clone().arrayBuffer()),
      receiptHeader: last.response.headers.get('x-service-receipt') ?? undefined,
      receiptId: last.response.headers.get('x-service-receipt-id') ?? undefined,
    },
    { jwks, policy, policyHash: canonicalPolicyHash(policy), measurement: '0'.repeat(96), noHardwareEnclave: 'the built-in engine in a test' },
  );
  return checks.filter((c) => !c.ok && c.waived === undefined).map((c) => c.name);
}

describe('the built-in engine through Sigil, with the official Anthropic SDK', () => {
  it('answers a message, with system given as a string, and its receipt verifies', async () => {
    const message = await client.messages.create({
      model: 'scripted',
      max_tokens: 64,
      system: 'Be brief.',
      messages: [{ role: 'user', content: 'Who served me?' }],
    });
    expect(message).toMatchObject({
      type: 'message',
      role: 'assistant',
      model: 'scripted',
      content: [{ type: 'text', text: SENTENCE }],
      stop_reason: 'end_turn',
    });
    expect(message.id).toMatch(/^msg_[0-9a-f]{24}$/);
    expect(message.usage.input_tokens).toBeGreaterThan(0);
    expect(message.usage.output_tokens).toBeGreaterThan(0);
    expect(await failedChecks(false)).toEqual([]);
  });

  it('streams with system as text blocks: the text deltas add up, message_stop ends it, its receipt verifies', async () => {
    const stream = client.messages.stream({
      model: 'scripted',
      max_tokens: 64,
      system: [
        { type: 'text', text: 'Be ' },
        { type: 'text', text: 'brief.' },
      ],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Who served me?' }] }],
    });
    const types: string[] = [];
    stream.on('streamEvent', (event) => types.push(event.type));
    const final = await stream.finalMessage();
    expect(final.content).toEqual([{ type: 'text', text: SENTENCE }]);
    expect(types.slice(0, 2)).toEqual(['message_start', 'content_block_start']);
    expect(types.slice(-3)).toEqual(['content_block_stop', 'message_delta', 'message_stop']);
    expect(types.filter((t) => t === 'content_block_delta').length).toBeGreaterThan(1);
    expect(await failedChecks(true)).toEqual([]);
  });

  it('calls a tool it is told to: a tool_use block whose input fits the schema, streamed and not', async () => {
    const message = await client.messages.create({
      model: 'scripted',
      max_tokens: 64,
      tools: [WEATHER],
      tool_choice: { type: 'tool', name: 'get_weather' },
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
    });
    const call = message.content.find((b) => b.type === 'tool_use')!;
    expect(call).toMatchObject({ type: 'tool_use', name: 'get_weather' });
    expect(['Paris', 'Lyon']).toContain((call.input as { city: string }).city);
    expect(typeof (call.input as { metric: unknown }).metric).toBe('boolean');
    expect(await failedChecks(false)).toEqual([]);

    const streamed = await client.messages
      .stream({
        model: 'scripted',
        max_tokens: 64,
        tools: [WEATHER],
        tool_choice: { type: 'tool', name: 'get_weather' },
        messages: [{ role: 'user', content: 'Weather?' }],
      })
      .finalMessage();
    const streamedCall = streamed.content.find((b) => b.type === 'tool_use')!;
    expect(['Paris', 'Lyon']).toContain((streamedCall.input as { city: string }).city);
    expect(await failedChecks(true)).toEqual([]);
  });

  it('takes the tool result back (the scripted model answers it in text of its own)', async () => {
    const message = await client.messages.create({
      model: 'scripted',
      max_tokens: 64,
      tools: [WEATHER],
      messages: [
        { role: 'user', content: 'What is the weather in Paris?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris', metric: true } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: '21 C, sunny' }] },
      ],
      tool_choice: { type: 'none' },
    });
    expect(message.stop_reason).toBe('end_turn');
    expect(message.content).toEqual([{ type: 'text', text: expect.any(String) }]);
    expect(await failedChecks(false)).toEqual([]);
  });

  it("refuses a request without max_tokens with the Messages API's 400, which the SDK raises as BadRequestError", async () => {
    const refused = await client.messages
      .create({ model: 'scripted', messages: [{ role: 'user', content: 'hi' }] } as unknown as Anthropic.MessageCreateParamsNonStreaming)
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(Anthropic.BadRequestError);
    expect((refused as InstanceType<typeof Anthropic.BadRequestError>).error).toMatchObject({
      type: 'error',
      error: { type: 'invalid_request_error', message: "Missing required parameter: 'max_tokens'." },
    });
  });
});

describe('the built-in engine through Sigil, with the AI SDK (@ai-sdk/anthropic)', () => {
  const anthropic = () => createAnthropic({ baseURL: `${sigil.url}/v1`, apiKey: key });

  it('generates text', async () => {
    const { text } = await generateText({ model: anthropic()('scripted'), prompt: 'Who served me?', maxOutputTokens: 64 });
    expect(text).toBe(SENTENCE);
  });

  it('streams text', async () => {
    const result = streamText({ model: anthropic()('scripted'), prompt: 'Who served me?', maxOutputTokens: 64 });
    let text = '';
    for await (const delta of result.textStream) text += delta;
    expect(text).toBe(SENTENCE);
  });
});

describe('the built-in engine through sigil connect, with both Anthropic clients', () => {
  let connect: RunningConnect;
  let relay: ForgingProxy;
  let relayed: RunningConnect;
  // The zero-config start speaks plain http on loopback with sealed bodies: connect is told it may.
  const options = { listen: { host: '127.0.0.1', port: 0 }, allowNoTee: true, allowInsecureHttp: true };

  beforeAll(async () => {
    connect = await startConnect({ service: sigil.url, ...options });
    relay = await startForgingProxy(sigil.url);
    relayed = await startConnect({ service: relay.url, ...options });
  }, 60_000);

  afterAll(async () => {
    await relayed?.close();
    await relay?.close();
    await connect?.close();
  });

  it('relays a JSON message, a stream and a tool call from the official SDK, each receipt verified by connect', async () => {
    const viaConnect = new Anthropic({ baseURL: connect.url, apiKey: key, maxRetries: 0 });
    const message = await viaConnect.messages.create({ model: 'scripted', max_tokens: 64, messages: [{ role: 'user', content: 'Who served me?' }] });
    expect(message.content).toEqual([{ type: 'text', text: SENTENCE }]);
    expect(connect.fetch.receipts.at(-1)).toMatchObject({ path: '/v1/messages', stream: false, ok: true });

    const streamed = await viaConnect.messages
      .stream({ model: 'scripted', max_tokens: 64, messages: [{ role: 'user', content: 'Who served me?' }] })
      .finalMessage();
    expect(streamed.content).toEqual([{ type: 'text', text: SENTENCE }]);
    expect(connect.fetch.receipts.at(-1)).toMatchObject({ path: '/v1/messages', stream: true, ok: true });

    const called = await viaConnect.messages.create({
      model: 'scripted',
      max_tokens: 64,
      tools: [WEATHER],
      tool_choice: { type: 'tool', name: 'get_weather' },
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
    });
    expect(called.content.find((b) => b.type === 'tool_use')).toMatchObject({ type: 'tool_use', name: 'get_weather' });
    expect(connect.fetch.receipts.at(-1)).toMatchObject({ path: '/v1/messages', stream: false, ok: true });
    expect(connect.fetch.attestation.hpkeKeyConfig).not.toBeNull();
  });

  it('answers the AI SDK, generated and streamed, each receipt verified by connect', async () => {
    const anthropic = createAnthropic({ baseURL: `${connect.url}/v1`, apiKey: key });
    const { text } = await generateText({ model: anthropic('scripted'), prompt: 'Who served me?', maxOutputTokens: 64 });
    expect(text).toBe(SENTENCE);
    expect(connect.fetch.receipts.at(-1)).toMatchObject({ path: '/v1/messages', stream: false, ok: true });
    let streamed = '';
    for await (const delta of streamText({ model: anthropic('scripted'), prompt: 'Who served me?', maxOutputTokens: 64 }).textStream) streamed += delta;
    expect(streamed).toBe(SENTENCE);
    expect(connect.fetch.receipts.at(-1)).toMatchObject({ path: '/v1/messages', stream: true, ok: true });
  });

  it("gives the SDK an error, never a success, when a relay on the way answers in the service's place", async () => {
    relay.forge = (method, path) =>
      method === 'POST' && path === '/v1/messages'
        ? {
            status: 200,
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({
              id: 'msg_forged',
              type: 'message',
              role: 'assistant',
              model: 'scripted',
              content: [{ type: 'text', text: 'forged answer' }],
              stop_reason: 'end_turn',
              stop_sequence: null,
              usage: { input_tokens: 1, output_tokens: 2 },
            }),
          }
        : undefined;
    const viaRelay = new Anthropic({ baseURL: relayed.url, apiKey: key, maxRetries: 0 });
    const refused = await viaRelay.messages
      .create({ model: 'scripted', max_tokens: 64, messages: [{ role: 'user', content: 'Who served me?' }] })
      .catch((e: unknown) => e);
    expect(relay.forged).toBe(1);
    expect(refused).toBeInstanceOf(Anthropic.APIError);
    expect(JSON.stringify((refused as InstanceType<typeof Anthropic.APIError>).error)).not.toContain('forged answer');
    const refusedByAiSdk = await generateText({
      model: createAnthropic({ baseURL: `${relayed.url}/v1`, apiKey: key })('scripted'),
      prompt: 'Who served me?',
      maxOutputTokens: 64,
      maxRetries: 0,
    }).catch((e: unknown) => e);
    expect(relay.forged).toBe(2);
    const why =
      'sigil connect did not pass this answer on: the answer to a sealed request (HTTP 200) is not sealed to our request: it may not come from the enclave, so it is not returned';
    expect((refused as InstanceType<typeof Anthropic.APIError>).status).toBe(502);
    expect((refused as Error).message).toBe(`502 ${why} (path: /v1/messages, type: api_error)`);
    expect((refusedByAiSdk as Error).message).toBe(why);
  });
});
