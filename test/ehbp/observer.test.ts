import { createHash } from 'node:crypto';
import { Identity } from 'ehbp';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttestedFetch } from '../../src/client/index.ts';
import { splitSealedJson } from '../../src/protocol/sealed-receipt.ts';
import { checkMark } from '../../src/verify/check.ts';
import { splitReceiptStream } from '../../src/verify/index.ts';
import { expectVerifiedReceipt } from '../support/receipts.ts';
import { hostPort } from '../support/raw-http.ts';
import { startRecordingProxy, type RecordingProxy } from '../support/recording-proxy.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** docs/ehbp.md, "What an observer sees": a load balancer in front of Sigil keeps every byte both ways. */
const MODEL = 'observer-model-q7';
const PROVIDER = 'observer-provider-k2';
const MODEL_HASH = '01'.repeat(32);

let engine: TestEngine;
let sigil: TestSigil;
let proxy: RecordingProxy;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: [MODEL] });
  sigil = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: MODEL, provider: PROVIDER }] });
  proxy = await startRecordingProxy(hostPort(sigil.url));
});

afterAll(async () => {
  await proxy.close();
  await sigil.close(0);
  await engine.close();
});

const sha256Hex = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
const chatBody = (content: string, stream: boolean) => JSON.stringify({ model: MODEL, messages: [{ role: 'user', content }], stream });

/** What must never show in the record: everything that identifies the exchange or confirms a guess of its plaintext. */
function expectNothingIdentifying(
  record: string,
  secrets: { nonce: string; completionId: string; receiptId: string; request: Uint8Array; response: Uint8Array; jws: string },
) {
  expect(record).toContain('POST /v1/chat/completions');
  for (const value of [
    MODEL,
    PROVIDER,
    MODEL_HASH,
    secrets.nonce,
    secrets.completionId,
    secrets.receiptId,
    sha256Hex(secrets.request),
    sha256Hex(secrets.response),
    secrets.jws.split('.')[1]!,
  ]) {
    expect(value.length).toBeGreaterThan(8);
    expect(record).not.toContain(value);
  }
  expect(record.toLowerCase()).not.toContain('x-service-nonce');
  expect(record.toLowerCase()).not.toContain('x-service-receipt-id');
}

describe('an observer of EHBP exchanges that asked for receipts', () => {
  it('with the npm ehbp client (JSON and stream) learns no model, nonce, completion id, receipt or plaintext hash; the sealed receipts verify', async () => {
    const keyConfig = new Uint8Array(await (await fetch(`${sigil.url}/.well-known/hpke-keys`)).arrayBuffer());
    const identity = await Identity.unmarshalPublicConfig(keyConfig);
    for (const stream of [false, true]) {
      proxy.forget();
      const plaintext = Buffer.from(chatBody('a guessable prompt 3141', stream));
      const { request, context } = await identity.encryptRequestWithContext(
        new Request(`${proxy.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-service-receipt': 'true' },
          body: plaintext,
        }),
      );
      const response = await fetch(request);
      expect(response.status).toBe(200);
      expect(response.headers.get('x-service-receipt')).toBeNull();
      expect(response.headers.get('x-service-receipt-id')).toBeNull();
      const opened = new Uint8Array(await (await identity.decryptResponseWithContext(response, context!)).arrayBuffer());
      const split = stream ? splitReceiptStream(opened) : splitSealedJson(opened)!;
      const body = Buffer.from(split.body).toString('utf8');
      const completionId = /"id":"([^"]+)"/.exec(body)![1]!;
      // The nonce is the HPKE export under the label docs/ehbp.md names, computed here without Sigil's code.
      const nonce = Buffer.from(await context!.senderContext.Export(new TextEncoder().encode('sigil receipt nonce'), 32)).toString('hex');
      const { checks, claims } = await expectVerifiedReceipt(sigil.url, split.receipt, {
        nonce,
        requestBytes: plaintext,
        responseBytes: split.body,
        receiptType: 'message',
      });
      // allowNoTee waives the development service's missing hardware (WAIVED, never a pass); everything else passes.
      expect(checks.filter((c) => checkMark(c) !== 'PASS').map((c) => `${checkMark(c)} ${c.name}`)).toEqual(['WAIVED receipt.tee']);
      expect(claims!.selected_model.model_id).toBe(MODEL);
      expect(claims!.completion_id).toBe(completionId);
      if (!stream) expect(JSON.parse(body)).toMatchObject({ object: 'chat.completion', model: MODEL });
      expectNothingIdentifying(proxy.record(), {
        nonce,
        completionId,
        receiptId: claims!.receipt_id,
        request: plaintext,
        response: split.body,
        jws: split.receipt,
      });
    }
  });

  it('with the attested client and the openai package learns none of them either, and every receipt verifies in the client', async () => {
    const attested = await createAttestedFetch({ baseURL: `${proxy.url}/v1`, allowNoTee: true });
    try {
      const client = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: sigil.key, maxRetries: 0, fetch: attested as unknown as typeof fetch });
      proxy.forget();
      const completion = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'a guessable prompt 2718' }] });
      expect(completion.object).toBe('chat.completion');
      const json = attested.receipts.at(-1)!;
      expect(json).toMatchObject({ ok: true, stream: false });
      expect(json.claims!.completion_id).toBe(completion.id);
      const record = proxy.record();
      expect(record).not.toContain(completion.id);
      expect(record).not.toContain(json.claims!.nonce);
      expect(record).not.toContain(json.claims!.request_hash!.slice('sha256:'.length));
      expect(record).not.toContain(json.claims!.response_hash!.slice('sha256:'.length));
      expect(record).not.toContain(json.claims!.receipt_id);
      expect(record).not.toContain(MODEL);

      proxy.forget();
      const stream = await client.chat.completions.create({ model: MODEL, stream: true, messages: [{ role: 'user', content: 'one two three' }] });
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
      expect(text.length).toBeGreaterThan(0);
      const streamed = attested.receipts.at(-1)!;
      expect(streamed).toMatchObject({ ok: true, stream: true });
      const streamRecord = proxy.record();
      for (const value of [
        MODEL,
        PROVIDER,
        MODEL_HASH,
        streamed.claims!.nonce,
        streamed.claims!.completion_id!,
        streamed.claims!.receipt_id,
        streamed.claims!.response_hash!.slice(7),
        streamed.claims!.request_hash!.slice(7),
      ]) {
        expect(streamRecord).not.toContain(value);
      }
    } finally {
      await attested.close();
    }
  });

  it("a sealed stream's receipt is the one a clear stream gets (the same claims: model, provider, model_hash, nonce, completion id, both hashes), also at GET /v1/receipts/{id}", async () => {
    const claimsOf = (jws: string) => JSON.parse(Buffer.from(jws.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
    const clear = await fetch(`${sigil.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-service-receipt': 'true', 'x-service-nonce': 'clear-nonce-0001' },
      body: chatBody('a clear prompt', true),
    });
    const clearReceipt = claimsOf(splitReceiptStream(new Uint8Array(await clear.arrayBuffer())).receipt);

    const keyConfig = new Uint8Array(await (await fetch(`${sigil.url}/.well-known/hpke-keys`)).arrayBuffer());
    const identity = await Identity.unmarshalPublicConfig(keyConfig);
    const { request, context } = await identity.encryptRequestWithContext(
      new Request(`${proxy.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-service-receipt': 'true' },
        body: chatBody('a sealed prompt', true),
      }),
    );
    const opened = new Uint8Array(await (await identity.decryptResponseWithContext(await fetch(request), context!)).arrayBuffer());
    const sealedJws = splitReceiptStream(opened).receipt;
    const sealedReceipt = claimsOf(sealedJws);

    expect(Object.keys(sealedReceipt).sort()).toEqual(Object.keys(clearReceipt).sort());
    expect(sealedReceipt).toMatchObject({
      receipt_type: 'message',
      selected_model: { provider: PROVIDER, model_id: MODEL, model_hash: `sha256:${MODEL_HASH}` },
    });
    expect(sealedReceipt.selected_model).toEqual(clearReceipt.selected_model);
    for (const claim of ['nonce', 'completion_id', 'request_hash', 'response_hash']) expect(sealedReceipt[claim]).toMatch(/^(sha256:)?[0-9a-zA-Z-]{8,}/);
    const stored = await fetch(`${sigil.url}/v1/receipts/${String(sealedReceipt.receipt_id)}`, { headers: { authorization: `Bearer ${sigil.key}` } });
    expect(await stored.json()).toEqual({ id: sealedReceipt.receipt_id, receipt: sealedJws });
  });
});
