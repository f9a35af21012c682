import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Identity, createTransport } from 'ehbp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deriveResponseKeys, ResponseSealer } from '../../src/ehbp/response-seal.ts';
import { splitSealedJson } from '../../src/protocol/sealed-receipt.ts';
import { splitReceiptStream } from '../../src/verify/index.ts';
import { expectVerifiedReceipt } from '../support/receipts.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** SPEC 9 / issue 13: EHBP, against its published vectors and the npm `ehbp` client. */
const vector = (name: string) => JSON.parse(readFileSync(join(import.meta.dirname, '../vectors/ehbp', name), 'utf8')) as Record<string, string>;
const hex = (s: string) => Buffer.from(s, 'hex');

describe('EHBP vectors', () => {
  it('derives the response key and nonce base of derive.json', () => {
    const v = vector('derive.json');
    const keys = deriveResponseKeys(hex(v.exportedSecret!), hex(v.requestEnc!), hex(v.responseNonce!));
    expect(keys.key.toString('hex')).toBe(v.derivedKey);
    expect(keys.nonceBase.toString('hex')).toBe(v.derivedNonceBase);
  });

  it('seals the plaintext of response-decryption.json into exactly its encrypted response', () => {
    const v = vector('response-decryption.json');
    const sealer = new ResponseSealer(deriveResponseKeys(hex(v.exportedSecret!), hex(v.requestEnc!), hex(v.responseNonce!)));
    expect(sealer.seal(hex(v.plaintext!)).toString('hex')).toBe(v.encryptedResponse);
  });

  it('numbers frames: the second frame of a response differs from the first for the same plaintext', () => {
    const v = vector('response-decryption.json');
    const sealer = new ResponseSealer(deriveResponseKeys(hex(v.exportedSecret!), hex(v.requestEnc!), hex(v.responseNonce!)));
    const first = sealer.seal(hex(v.plaintext!));
    expect(sealer.seal(hex(v.plaintext!)).equals(first)).toBe(false);
  });
});

let engine: TestEngine;
let sigil: TestSigil;
let strict: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  [sigil, strict] = await Promise.all([
    startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }] }),
    startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }], config: { ehbp: { required: true } } }),
  ]);
});

afterAll(async () => {
  await Promise.all([sigil.close(0), strict.close(0)]);
  await engine.close();
});

const chatBody = (content: string, stream = false) => JSON.stringify({ model: 'm', messages: [{ role: 'user', content }], stream });
const enginePosts = () => engine.requests.filter((r) => r.method === 'POST').length;

/** Frames of a sealed body: LEN (4 bytes) || ciphertext, repeated. */
function frames(body: Buffer): number[] {
  const lengths: number[] = [];
  for (let at = 0; at < body.length;) {
    const length = body.readUInt32BE(at);
    lengths.push(length);
    at += 4 + length;
  }
  return lengths;
}

/** Encrypts one request with the npm client's identity and sends it with the global fetch, so the raw sealed reply can be inspected. */
async function sealedExchange(s: TestSigil, body: string, headers: Record<string, string> = {}) {
  const keyConfig = new Uint8Array(await (await fetch(`${s.url}/.well-known/hpke-keys`)).arrayBuffer());
  const identity = await Identity.unmarshalPublicConfig(keyConfig);
  const { request, context } = await identity.encryptRequestWithContext(
    new Request(`${s.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json', ...headers },
      body,
    }),
  );
  const sealedRequest = Buffer.from(await request.clone().arrayBuffer());
  const response = await fetch(request);
  const raw = Buffer.from(await response.clone().arrayBuffer());
  return { identity, context: context!, sealedRequest, response, raw, request };
}

describe('the EHBP server', () => {
  it('serves its key config at /.well-known/hpke-keys, the very bytes the attestation binds', async () => {
    const response = await fetch(`${sigil.url}/.well-known/hpke-keys`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/ohttp-keys');
    expect(response.headers.get('access-control-allow-origin')).toBe('*');
    const bytes = Buffer.from(await response.arrayBuffer());
    expect(bytes.length).toBe(41);
    expect(bytes.subarray(0, 3).toString('hex')).toBe('000020');
    expect(bytes.subarray(35).toString('hex')).toBe('000400010002');
    const attestation = (await (await fetch(`${sigil.url}/v1/verify/attestation`)).json()) as { binding: { hpke_key_config: string } };
    expect(attestation.binding.hpke_key_config).toBe(bytes.toString('base64'));
  });

  it('answers the npm ehbp client (JSON): the body travels sealed both ways, the receipt in its last sealed frame, over the plaintext', async () => {
    const plaintext = chatBody('a secret question 51');
    const { identity, context, sealedRequest, response, raw } = await sealedExchange(sigil, plaintext, {
      'x-service-receipt': 'true',
      'x-service-nonce': 'n-ehbp',
    });
    expect(response.status).toBe(200);
    expect(sealedRequest.toString('latin1')).not.toContain('secret question');
    expect(response.headers.get('ehbp-response-nonce')).toMatch(/^[0-9a-f]{64}$/);
    expect(response.headers.get('content-length')).toBeNull();
    expect(raw.toString('latin1')).not.toContain('chat.completion');
    const opened = await identity.decryptResponseWithContext(response, context);
    expect(response.headers.get('x-service-receipt')).toBeNull();
    const split = splitSealedJson(new Uint8Array(await opened.arrayBuffer()))!;
    const bytes = Buffer.from(split.body);
    expect((JSON.parse(bytes.toString('utf8')) as { object: string }).object).toBe('chat.completion');
    await expectVerifiedReceipt(sigil.url, split.receipt, {
      nonce: 'n-ehbp',
      requestBytes: Buffer.from(plaintext),
      responseBytes: bytes,
      receiptType: 'message',
    });
    // What the engine received is the plaintext the client sealed.
    expect(engine.requests.at(-1)!.body.toString('utf8')).toContain('a secret question 51');
  });

  it('seals each stream event as its own frame, and the stream ends with the receipt comment, verified over the plaintext', async () => {
    const plaintext = chatBody('one two three four five', true);
    const { identity, context, response, raw } = await sealedExchange(sigil, plaintext, { 'x-service-receipt': 'true', 'x-service-nonce': 'n-stream' });
    expect(response.status).toBe(200);
    expect(raw.toString('latin1')).not.toContain('data:');
    const opened = Buffer.from(await (await identity.decryptResponseWithContext(response, context)).arrayBuffer());
    const events = opened.toString('utf8').split('\n\n').filter(Boolean);
    // One frame per write: each event (and the receipt comment) sealed as it left.
    expect(frames(raw).length).toBeGreaterThanOrEqual(events.length);
    const split = splitReceiptStream(opened);
    await expectVerifiedReceipt(sigil.url, split.receipt, {
      nonce: 'n-stream',
      requestBytes: Buffer.from(plaintext),
      responseBytes: split.body,
      receiptType: 'message',
    });
  });

  it("works through the npm client's own transport, JSON and streams", async () => {
    const transport = await createTransport(sigil.url);
    const json = await transport.post(`${sigil.url}/v1/chat/completions`, chatBody('hi'), {
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
    });
    expect(json.status).toBe(200);
    expect(((await json.json()) as { object: string }).object).toBe('chat.completion');
    const stream = await transport.post(`${sigil.url}/v1/chat/completions`, chatBody('one two three', true), {
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
    });
    const text = await stream.text();
    expect(text).toMatch(/^data: \{/);
    expect(text).toContain('data: [DONE]\n\n');
  });

  it('serves requests without the header in the clear, unless ehbp.required', async () => {
    const clear = await fetch(`${sigil.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
      body: chatBody('hi'),
    });
    expect(clear.status).toBe(200);
    expect(clear.headers.get('ehbp-response-nonce')).toBeNull();
    await clear.arrayBuffer();
    const before = enginePosts();
    const refused = await fetch(`${strict.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${strict.key}`, 'content-type': 'application/json' },
      body: chatBody('hi'),
    });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('ehbp_required');
    expect(enginePosts()).toBe(before);
    const sealed = await sealedExchange(strict, chatBody('hi'));
    expect(sealed.response.status).toBe(200);
  });

  describe('refuses, with a clear error and nothing sent to the engine', () => {
    const post = (s: TestSigil, headers: Record<string, string>, body: BodyInit) =>
      fetch(`${s.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json', ...headers },
        body,
      });

    it('an encapsulated key that is not 32 bytes of hex', async () => {
      const before = enginePosts();
      const response = await post(sigil, { 'ehbp-encapsulated-key': 'zz' }, Buffer.alloc(40));
      expect(response.status).toBe(400);
      expect(response.headers.get('ehbp-response-nonce')).toBeNull();
      expect(await response.json()).toEqual({
        error: {
          message: 'The Ehbp-Encapsulated-Key header must be sent once, as 64 hex digits.',
          type: 'invalid_request_error',
          param: 'Ehbp-Encapsulated-Key',
          code: 'ehbp_invalid_encapsulated_key',
        },
      });
      expect(enginePosts()).toBe(before);
    });

    it('a body sealed to another key (stale or wrong): 422 with the key-config problem type, which the npm client recognises', async () => {
      const before = enginePosts();
      const other = await Identity.generate();
      const stale = await Identity.unmarshalPublicConfig(await other.marshalConfig());
      const { request } = await stale.encryptRequestWithContext(
        new Request(`${sigil.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
          body: chatBody('hi'),
        }),
      );
      const response = await fetch(request);
      expect(response.status).toBe(422);
      expect(response.headers.get('content-type')).toBe('application/problem+json');
      const body = (await response.json()) as { type: string; error: { code: string } };
      expect(body.type).toBe('urn:ietf:params:ehbp:error:key-config');
      expect(body.error.code).toBe('ehbp_key_config_mismatch');
      expect(enginePosts()).toBe(before);
    });

    it('a malformed frame or a truncated chunk: 400, sealed once the first frame opened', async () => {
      const before = enginePosts();
      const { identity, context, sealedRequest, request } = await (async () => {
        const keyConfig = new Uint8Array(await (await fetch(`${sigil.url}/.well-known/hpke-keys`)).arrayBuffer());
        const id = await Identity.unmarshalPublicConfig(keyConfig);
        const r = await id.encryptRequestWithContext(
          new Request(`${sigil.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
            body: chatBody('hi'),
          }),
        );
        return { identity: id, context: r.context!, sealedRequest: Buffer.from(await r.request.clone().arrayBuffer()), request: r.request };
      })();
      const enc = request.headers.get('ehbp-encapsulated-key')!;
      // The first frame intact, then a frame whose length runs past the end.
      const truncated = Buffer.concat([sealedRequest, Buffer.from('00000100', 'hex'), Buffer.alloc(10)]);
      const response = await post(sigil, { 'ehbp-encapsulated-key': enc }, truncated);
      expect(response.status).toBe(400);
      expect(response.headers.get('ehbp-response-nonce')).toMatch(/^[0-9a-f]{64}$/);
      const opened = await identity.decryptResponseWithContext(response, context);
      expect(((await opened.json()) as { error: { code: string } }).error.code).toBe('ehbp_invalid_body');
      // A length prefix cut in half: no frame opened, so the error is in the clear.
      const cut = await post(sigil, { 'ehbp-encapsulated-key': enc }, Buffer.from('0000', 'hex'));
      expect(cut.status).toBe(400);
      expect(((await cut.json()) as { error: { code: string } }).error.code).toBe('ehbp_invalid_body');
      expect(enginePosts()).toBe(before);
    });

    it('an unauthenticated encrypted request: 401 in the clear, the body never opened', async () => {
      const before = enginePosts();
      const keyConfig = new Uint8Array(await (await fetch(`${sigil.url}/.well-known/hpke-keys`)).arrayBuffer());
      const identity = await Identity.unmarshalPublicConfig(keyConfig);
      const { request } = await identity.encryptRequestWithContext(
        new Request(`${sigil.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chatBody('hi') }),
      );
      const response = await fetch(request);
      expect(response.status).toBe(401);
      expect(response.headers.get('ehbp-response-nonce')).toBeNull();
      expect(enginePosts()).toBe(before);
    });
  });
});
