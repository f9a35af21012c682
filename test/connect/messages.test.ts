import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startConnect, type RunningConnect } from '../../src/connect/start.ts';
import { startForgingProxy, type ForgingProxy } from '../support/forging-proxy.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** Issue 50: sigil connect in front of a Sigil serving Anthropic's Messages API, with the official Anthropic SDK. */
let engine: TestEngine;
let sigil: TestSigil;
let connect: RunningConnect;
let client: Anthropic;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['claude-local'] });
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'claude-local', endpoints: ['chat', 'messages'] }],
    config: { tls: { mode: 'self-signed', hostnames: ['localhost'] } },
  });
  connect = await startConnect({ service: sigil.url.replace('127.0.0.1', 'localhost'), listen: { host: '127.0.0.1', port: 0 }, allowNoTee: true });
  client = new Anthropic({ baseURL: connect.url, apiKey: sigil.key, maxRetries: 0 });
});

afterAll(async () => {
  await connect.close();
  await sigil.close(0);
  await engine.close();
});

const TOOLS = [
  {
    name: 'get_weather',
    description: 'The weather in a city',
    input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] },
  },
];

describe('sigil connect with the official Anthropic SDK', () => {
  it('relays a JSON message whose receipt verified, the key sent as x-api-key passed through and the body sealed', async () => {
    const message = await client.messages.create({ model: 'claude-local', max_tokens: 32, messages: [{ role: 'user', content: 'hello there' }] });
    expect(message.content).toEqual([{ type: 'text', text: engine.reply }]);
    expect(connect.fetch.receipts.at(-1)).toMatchObject({ path: '/v1/messages', stream: false, ok: true });
    expect(connect.fetch.attestation.hpkeKeyConfig).not.toBeNull();
  });

  it('relays a stream event by event, message_stop last, once the receipt after it verified', async () => {
    const types: string[] = [];
    const stream = await client.messages.create({ model: 'claude-local', max_tokens: 32, stream: true, messages: [{ role: 'user', content: 'one two' }] });
    for await (const event of stream) types.push(event.type);
    expect(types.at(-1)).toBe('message_stop');
    expect(types.filter((t) => t === 'content_block_delta')).toHaveLength(engine.reply.split(/(?<= )/).length);
    expect(connect.fetch.receipts.at(-1)).toMatchObject({ path: '/v1/messages', stream: true, ok: true });
    const raw = await fetch(`${connect.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': sigil.key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'claude-local', max_tokens: 8, stream: true, messages: [{ role: 'user', content: 'raw' }] }),
    });
    const text = await raw.text();
    expect(text.endsWith('event: message_stop\ndata: {"type":"message_stop"}\n\n')).toBe(true);
    expect(text).not.toContain(': receipt ');
  });

  it('passes tools to the engine as sent, and verifies the answer', async () => {
    await client.messages.create({ model: 'claude-local', max_tokens: 32, tools: TOOLS, messages: [{ role: 'user', content: 'weather in Oslo?' }] });
    expect(JSON.parse(engine.requests.at(-1)!.body.toString()).tools).toEqual(TOOLS);
    expect(connect.fetch.receipts.at(-1)).toMatchObject({ path: '/v1/messages', ok: true });
  });
});

describe('a stream changed between connect and Sigil', () => {
  let plain: TestSigil;
  let proxy: ForgingProxy;
  let plainConnect: RunningConnect;
  beforeAll(async () => {
    plain = await startTestSigil({
      upstreams: { e: { url: engine.baseUrl } },
      models: [{ id: 'claude-local', endpoints: ['messages'] }],
      config: { ehbp: { enabled: false } },
    });
    proxy = await startForgingProxy(plain.url);
    plainConnect = await startConnect({
      service: proxy.url,
      listen: { host: '127.0.0.1', port: 0 },
      allowNoTee: true,
      allowInsecureHttp: true,
      allowUnsealedBodies: true,
    });
  });
  afterAll(async () => {
    await plainConnect.close();
    await proxy.close();
    await plain.close(0);
  });

  it("never reaches the app's message_stop: the stream ends with the Messages API's error event instead", async () => {
    proxy.rewrite = (method, path) =>
      method === 'POST' && path === '/v1/messages' ? (body) => Buffer.from(body.toString().replace('Hello', 'Howdy')) : undefined;
    const raw = await fetch(`${plainConnect.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': plain.key, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'claude-local', max_tokens: 32, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    const text = await raw.text();
    expect(text).toContain('Howdy');
    expect(text).not.toContain('message_stop');
    const last = text.trimEnd().split('\n\n').at(-1)!;
    expect(last.split('\n')[0]).toBe('event: error');
    expect(JSON.parse(last.split('\n')[1]!.slice('data: '.length))).toMatchObject({
      type: 'error',
      error: { type: 'api_error', code: 'receipt_verification_failed' },
    });

    const refused = await new Anthropic({ baseURL: plainConnect.url, apiKey: plain.key, maxRetries: 0 }).messages
      .create({ model: 'claude-local', max_tokens: 32, messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(Anthropic.APIError);
    expect((refused as InstanceType<typeof Anthropic.APIError>).status).toBe(502);
    expect((refused as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ type: 'error', error: { code: 'receipt_verification_failed' } });
  });
});
