import OpenAI from 'openai';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createObliviousFetch, fetchGatewayKeys, ObliviousRelayError } from '../../src/client/ohttp-fetch.ts';
import { encapsulateRequest } from '../../src/client/ohttp-encapsulate.ts';
import type { RunningRelay } from '../../src/cli/ohttp-relay.ts';
import { decodeResponse, encodeRequest } from '../../src/protocol/bhttp.ts';
import { encodeKeyConfig, parseKeyConfigs, type KeyConfig } from '../../src/protocol/ohttp.ts';
import { splitReceiptStream } from '../../src/verify/index.ts';
import { expectVerifiedReceipt } from '../support/receipts.ts';
import type { RecordingProxy } from '../support/recording-proxy.ts';
import type { TestEngine } from '../support/test-engine.ts';
import type { TestSigil } from '../support/sigil.ts';
import { RELAY_EGRESS, startRelayedSigil, type RelayedSigil } from '../support/relayed-sigil.ts';

/**
 * Issue 51: client → relay → Sigil on loopback, each on its own address (the client 127.0.0.4, the relay listening on
 * 127.0.0.2 and reaching Sigil from 127.0.0.3), with a recording proxy between the relay and Sigil: what the relay
 * forwards is all it could read or keep.
 */
const CLIENT_ADDRESS = '127.0.0.4';
const PROMPT = 'the secret question about a rash';

let engine: TestEngine;
let sigil: TestSigil;
let wire: RecordingProxy;
let relay: RunningRelay;
let keys: KeyConfig[];
const clientAgent = new Agent({ localAddress: CLIENT_ADDRESS });
const fromClient = ((input: string, init?: object) => undiciFetch(input, { ...init, dispatcher: clientAgent })) as unknown as typeof fetch;

let chain: RelayedSigil;

beforeAll(async () => {
  chain = await startRelayedSigil();
  ({ engine, sigil, wire, relay } = chain);
  keys = await fetchGatewayKeys(relay.url, { fetch: fromClient });
});

afterAll(async () => {
  await chain.close();
  await clientAgent.close();
});

const openai = () =>
  new OpenAI({
    baseURL: 'https://sigil.inside/v1',
    apiKey: sigil.key,
    fetch: createObliviousFetch({ relayUrl: relay.url, keys, fetch: fromClient }),
    maxRetries: 0,
  });

describe('the gateway key (RFC 9540), fetched through the relay', () => {
  it('is the key configuration the attestation binds as hpke_key_config, served as application/ohttp-keys', async () => {
    const attestation = (await (await fetch(`${sigil.url}/v1/verify/attestation`)).json()) as { binding: { hpke_key_config: string } };
    expect(keys).toHaveLength(1);
    expect(Buffer.from(encodeKeyConfig(keys[0]!)).toString('base64')).toBe(attestation.binding.hpke_key_config);
    const served = await fetch(`${sigil.url}/.well-known/ohttp-gateway`);
    expect(served.headers.get('content-type')).toBe('application/ohttp-keys');
    expect(parseKeyConfigs(new Uint8Array(await served.arrayBuffer()))).toEqual(keys);
  });
});

describe('a chat through client → relay → Sigil with the official openai client', () => {
  it('a JSON answer arrives, with a receipt over the exact bytes, and the wire between relay and Sigil holds neither the prompt, the key, nor the answer', async () => {
    wire.forget();
    const { data, response } = await openai()
      .chat.completions.create(
        { model: 'm', messages: [{ role: 'user', content: PROMPT }] },
        { headers: { 'x-service-receipt': 'true', 'x-service-nonce': 'n-ohttp-1' } },
      )
      .withResponse();
    expect(data.choices[0]!.message.content).toBe(engine.reply);
    const receipt = response.headers.get('x-service-receipt');
    expect(receipt).toMatch(/^ey/);
    const recorded = wire.record();
    for (const secret of [PROMPT, sigil.key, engine.reply, 'chat/completions', 'n-ohttp-1', 'x-service-receipt']) expect(recorded).not.toContain(secret);
    expect(recorded).toContain('content-type: message/ohttp-chunked-req');
    expect(recorded.toLowerCase()).not.toContain('x-forwarded-for');
    expect(recorded).not.toContain(CLIENT_ADDRESS);
    // Sigil's side saw the relay's egress address connect, and no other.
    expect(wire.peers().length).toBeGreaterThan(0);
    expect(new Set(wire.peers())).toEqual(new Set([RELAY_EGRESS]));
  });

  it('a stream arrives event by event, padded, and its message receipt verifies over the bytes the client decrypted', async () => {
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: PROMPT }], stream: true });
    const oblivious = createObliviousFetch({ relayUrl: relay.url, keys, fetch: fromClient });
    // Each engine event its own write, so each is its own sealed chunk.
    engine.behaviour = { chunkDelayMs: 5 };
    const answer = await oblivious('https://sigil.inside/v1/chat/completions', {
      method: 'POST',
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-service-receipt': 'true', 'x-service-nonce': 'n-ohttp-2' },
      body,
    });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toMatch(/text\/event-stream/);
    const pieces: Buffer[] = [];
    for await (const piece of answer.body!) pieces.push(Buffer.from(piece));
    engine.behaviour = {};
    // More than one piece: the answer was opened as it came, not once whole.
    expect(pieces.length).toBeGreaterThan(2);
    const split = splitReceiptStream(Buffer.concat(pieces));
    const text = Buffer.from(split.body).toString();
    expect(text).toContain('data: [DONE]');
    // Token-length padding, as a sealed EHBP stream has: comment lines of dots.
    expect(text).toMatch(/^:\.+\n/m);
    await expectVerifiedReceipt(sigil.url, split.receipt!, {
      nonce: 'n-ohttp-2',
      requestBytes: Buffer.from(body),
      responseBytes: split.body,
      receiptType: 'message',
    });
  });

  it("an inner request without a key gets Sigil's own 401 in OpenAI's shape, sealed: the relay sees a 200", async () => {
    const client = new OpenAI({
      baseURL: 'https://sigil.inside/v1',
      apiKey: 'sk-wrong',
      fetch: createObliviousFetch({ relayUrl: relay.url, keys, fetch: fromClient }),
      maxRetries: 0,
    });
    const error = await client.models.list().then(
      () => undefined,
      (e: unknown) => e,
    );
    // /v1/models is public: it answers. A chat with the wrong key is refused.
    expect(error).toBeUndefined();
    const refused = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((refused as InstanceType<typeof OpenAI.AuthenticationError>).code).toBe('invalid_api_key');
  });
});

describe('what the gateway refuses, and how', () => {
  const gateway = () => `${sigil.url}/.well-known/ohttp-gateway`;

  it('a body that is not an encapsulated request: 415 in the clear', async () => {
    const res = await fetch(gateway(), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(res.status).toBe(415);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('unsupported_media_type');
  });

  it('a request to a key this gateway does not have: 400 with the ohttp-key problem type (RFC 9458 §5.3)', async () => {
    const other: KeyConfig = { ...keys[0]!, keyId: 9 };
    const sealed = await encapsulateRequest(
      [other],
      encodeRequest({ method: 'GET', scheme: 'https', authority: '', path: '/v1/models', headers: [], content: new Uint8Array(0), trailers: [] }),
      'whole',
    );
    const res = await fetch(gateway(), { method: 'POST', headers: { 'content-type': 'message/ohttp-req' }, body: Buffer.from(sealed.body) });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toBe('application/problem+json');
    expect(((await res.json()) as { type: string }).type).toBe('https://iana.org/assignments/http-problem-types#ohttp-key');
  });

  it('the same encapsulated request sent twice: the second gets a sealed 409, and the engine runs once', async () => {
    const before = engine.requests.length;
    const inner = encodeRequest({
      method: 'POST',
      scheme: 'https',
      authority: 'sigil.inside',
      path: '/v1/chat/completions',
      headers: [
        ['authorization', `Bearer ${sigil.key}`],
        ['content-type', 'application/json'],
      ],
      content: Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'once' }] })),
      trailers: [],
    });
    const sealed = await encapsulateRequest(keys, inner, 'whole');
    const send = () => fetch(gateway(), { method: 'POST', headers: { 'content-type': 'message/ohttp-req' }, body: Buffer.from(sealed.body) });
    const first = decodeResponse(await sealed.openResponse(new Uint8Array(await (await send()).arrayBuffer())));
    expect(first.status).toBe(200);
    const second = await send();
    expect(second.status).toBe(200);
    const replayed = decodeResponse(await sealed.openResponse(new Uint8Array(await second.arrayBuffer())));
    expect(replayed.status).toBe(409);
    expect(engine.requests.length).toBe(before + 1);
  });

  it('a relay answer that is not an encapsulated response is an error, never an answer', async () => {
    const broken = createObliviousFetch({ relayUrl: `${sigil.url}/v1/models`, keys, fetch: fromClient });
    await expect(broken('https://sigil.inside/v1/models')).rejects.toBeInstanceOf(ObliviousRelayError);
    await expect(broken('https://sigil.inside/v1/models')).rejects.toMatchObject({ code: 'ERR_OHTTP_RELAY', name: 'ObliviousRelayError' });
  });
});
