import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttestedFetch, type AttestedFetch } from '../../src/client/index.ts';
import { checkMark } from '../../src/verify/check.ts';
import { startForgingProxy, type ForgingProxy } from '../support/forging-proxy.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** Issue 50: the attested client under Anthropic's SDK, sealed (EHBP) over TLS ending in the enclave, and behind a forging balancer. */
let engine: TestEngine;
let sigil: TestSigil;
let attested: AttestedFetch;
let client: Anthropic;
const FORGED_MESSAGE = JSON.stringify({
  id: 'msg_forged',
  type: 'message',
  role: 'assistant',
  content: [{ type: 'text', text: 'forged answer' }],
  model: 'claude-local',
  stop_reason: 'end_turn',
  stop_sequence: null,
  usage: { input_tokens: 1, output_tokens: 2 },
});

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['claude-local'] });
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'claude-local', endpoints: ['chat', 'messages'] }],
    config: { tls: { mode: 'self-signed', hostnames: ['localhost'] } },
  });
  attested = await createAttestedFetch({ baseURL: `${sigilUrl()}/v1`, allowNoTee: true });
  client = new Anthropic({ baseURL: sigilUrl(), apiKey: sigil.key, maxRetries: 0, fetch: attested as unknown as typeof fetch });
});

afterAll(async () => {
  await attested.close();
  await sigil.close(0);
  await engine.close();
});

const sigilUrl = () => sigil.url.replace('127.0.0.1', 'localhost');
const notPassed = () =>
  attested.receipts
    .at(-1)!
    .checks.filter((c) => checkMark(c) !== 'PASS')
    .map((c) => `${checkMark(c)} ${c.name}`);

describe('the attested client with the official Anthropic SDK', () => {
  it('seals a JSON Messages request and verifies its receipt, the endpoint included', async () => {
    const message = await client.messages.create({ model: 'claude-local', max_tokens: 32, messages: [{ role: 'user', content: 'hello there' }] });
    expect(message.content).toEqual([{ type: 'text', text: engine.reply }]);
    expect(engine.requests.at(-1)!.path).toBe('/v1/messages');
    const last = attested.receipts.at(-1)!;
    expect(last).toMatchObject({ path: '/v1/messages', stream: false, ok: true });
    expect(notPassed()).toEqual(['WAIVED receipt.tee']);
    expect(last.checks.find((c) => c.name === 'receipt.endpoint')?.detail).toBe('endpoint is /v1/messages, as expected');
    expect(last.claims?.endpoint).toBe('/v1/messages');
  });

  it('passes a sealed stream through event by event and verifies the receipt that follows message_stop', async () => {
    const stream = await client.messages.create({ model: 'claude-local', max_tokens: 32, stream: true, messages: [{ role: 'user', content: 'one two' }] });
    const deltas: string[] = [];
    for await (const event of stream) if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') deltas.push(event.delta.text);
    expect(deltas).toEqual(engine.reply.split(/(?<= )/));
    expect(attested.receipts.at(-1)).toMatchObject({ path: '/v1/messages', stream: true, ok: true });
    expect(notPassed()).toEqual(['WAIVED receipt.tee']);
  });
});

describe('behind a forging balancer', () => {
  let balancer: ForgingProxy;
  beforeAll(async () => {
    balancer = await startForgingProxy(sigil.url, { tls: true });
  });
  afterAll(async () => balancer.close());

  it('a Messages answer the balancer wrote is an error, never a success', async () => {
    const behind = await createAttestedFetch({ baseURL: `${balancer.url}/v1`, allowNoTee: true, ca: balancer.certificate });
    try {
      balancer.forge = (method, path) =>
        method === 'POST' && path === '/v1/messages' ? { status: 200, headers: { 'content-type': 'application/json' }, body: FORGED_MESSAGE } : undefined;
      const forgedClient = new Anthropic({ baseURL: balancer.url, apiKey: sigil.key, maxRetries: 0, fetch: behind as unknown as typeof fetch });
      const refused = await forgedClient.messages.create({ model: 'claude-local', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }).then(
        () => undefined,
        (e: unknown) => e as Error & { cause?: { code?: string } },
      );
      expect(refused).toBeInstanceOf(Anthropic.APIConnectionError);
      expect(refused?.cause?.code).toBe('ERR_VERIFY_UNSEALED_RESPONSE');
      expect(balancer.forged).toBe(1);
    } finally {
      await behind.close();
    }
  });
});
