import { createHash } from 'node:crypto';
import { compactVerify, decodeProtectedHeader, importJWK, type JWK } from 'jose';
import canonicalizeModule from 'canonicalize';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

const canonicalize = canonicalizeModule as unknown as (v: unknown) => string;
const sha256 = (bytes: Buffer | string) => 'sha256:' + createHash('sha256').update(bytes).digest('hex');

let engine: TestEngine;
let sigil: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m1', 'engine-m2'] });
  sigil = await startTestSigil({
    upstreams: { main: { url: engine.baseUrl } },
    models: [{ id: 'm1' }, { id: 'm2', upstream_model: 'engine-m2', provider: 'acme' }],
    config: { brand: 'Acme', receipts: { retention_s: 60 } },
  });
});

afterAll(async () => {
  await sigil.close();
  await engine.close();
});

async function post(body: string, headers: Record<string, string> = {}, key = sigil.key): Promise<Response> {
  return fetch(`${sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body,
  });
}

/** What a client does: fetch the JWKS, take the key the header names, verify with it, then read the header. */
async function verifyAsClient(jws: string): Promise<Record<string, unknown>> {
  const jwks = (await (await fetch(`${sigil.url}/v1/verify/jwks.json`)).json()) as { keys: JWK[] };
  const { kid } = decodeProtectedHeader(jws);
  const jwk = jwks.keys.find((k) => k.kid === kid);
  if (jwk === undefined) throw new Error(`no JWKS key has the receipt's kid ${String(kid)}`);
  // Not inside a try/catch: a wrong protected header must fail the test, not move on to the next key.
  const { payload, protectedHeader } = await compactVerify(jws, await importJWK(jwk, 'ES256'), { algorithms: ['ES256'] });
  expect(protectedHeader).toEqual({ alg: 'ES256', typ: 'JWT', kid: jwk.kid });
  return JSON.parse(new TextDecoder().decode(payload)) as Record<string, unknown>;
}

async function policyHash(): Promise<string> {
  return sha256(canonicalize(await (await fetch(`${sigil.url}/v1/verify/policy`)).json()));
}

const body = JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'Prove it' }] });
const streamBody = JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'Prove it' }], stream: true });

describe('message receipt on a JSON response', () => {
  it('binds the enclave, policy, model, nonce and the exact request and response bytes', async () => {
    const res = await post(body, { 'X-Acme-Receipt': 'true', 'X-Acme-Nonce': 'client-nonce-42' });
    const responseBytes = Buffer.from(await res.arrayBuffer());
    const jws = res.headers.get('x-acme-receipt')!;
    const claims = await verifyAsClient(jws);
    const completion = JSON.parse(responseBytes.toString());
    expect(claims).toEqual({
      schema_version: '1.2.0',
      receipt_type: 'message',
      receipt_id: res.headers.get('x-acme-receipt-id'),
      enclave_measurement: '0'.repeat(96),
      tee: 'none',
      policy_hash: await policyHash(),
      selected_model: { provider: 'test-provider', model_id: 'm1', model_hash: 'sha256:' + '01'.repeat(32) },
      nonce: 'client-nonce-42',
      issued_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
      iat: expect.any(Number),
      endpoint: '/v1/chat/completions',
      completion_id: completion.id,
      request_hash: sha256(body),
      response_hash: sha256(responseBytes),
    });
    expect(Math.abs((claims.iat as number) * 1000 - Date.parse(claims.issued_at as string))).toBe(0);
    expect(claims.receipt_id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('hashes the rewritten bytes the client received when the engine name differs', async () => {
    const raw = JSON.stringify({ model: 'm2', messages: [{ role: 'user', content: 'x' }] });
    const res = await post(raw, { 'x-acme-receipt': 'true' });
    const bytes = Buffer.from(await res.arrayBuffer());
    const claims = await verifyAsClient(res.headers.get('x-acme-receipt')!);
    expect(JSON.parse(bytes.toString()).model).toBe('m2');
    expect(claims.response_hash).toBe(sha256(bytes));
    expect(claims.request_hash).toBe(sha256(raw));
    expect(claims.selected_model).toEqual({ provider: 'acme', model_id: 'm2', model_hash: 'sha256:' + '02'.repeat(32) });
  });

  it('carries an empty nonce when the client sent none', async () => {
    const res = await post(body, { 'x-acme-receipt': 'true' });
    await res.arrayBuffer();
    expect((await verifyAsClient(res.headers.get('x-acme-receipt')!)).nonce).toBe('');
  });

  it('makes no receipt without the request header', async () => {
    const res = await post(body);
    await res.arrayBuffer();
    expect(res.headers.get('x-acme-receipt')).toBeNull();
    expect(res.headers.get('x-acme-receipt-id')).toBeNull();
  });

  it('uses the kid that is the RFC 7638 thumbprint of the published key', async () => {
    const res = await post(body, { 'x-acme-receipt': 'true' });
    await res.arrayBuffer();
    const { keys } = (await (await fetch(`${sigil.url}/v1/verify/jwks.json`)).json()) as { keys: JWK[] };
    const { kty, crv, x, y } = keys[0]!;
    const thumbprint = createHash('sha256').update(JSON.stringify({ crv, kty, x, y })).digest('base64url');
    expect(decodeProtectedHeader(res.headers.get('x-acme-receipt')!).kid).toBe(thumbprint);
    expect(keys).toEqual([{ kty: 'EC', crv: 'P-256', x, y, kid: thumbprint, use: 'sig', alg: 'ES256' }]);
  });
});

describe('receipts on a stream', () => {
  it('sends a model receipt in the header and a message receipt after [DONE]', async () => {
    const res = await post(streamBody, { 'x-acme-receipt': 'true', 'x-acme-nonce': 'n-1' });
    const text = await res.text();
    const modelClaims = await verifyAsClient(res.headers.get('x-acme-receipt')!);
    expect(modelClaims).toMatchObject({ receipt_type: 'model', nonce: 'n-1', receipt_id: res.headers.get('x-acme-receipt-id') });
    expect(modelClaims).not.toHaveProperty('response_hash');
    expect(modelClaims).not.toHaveProperty('completion_id');

    const done = text.indexOf('data: [DONE]\n\n') + 'data: [DONE]\n\n'.length;
    const trailer = text.slice(done);
    expect(trailer).toMatch(/^: receipt [A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\n\n$/);
    const messageJws = trailer.slice(': receipt '.length, -2);
    const claims = await verifyAsClient(messageJws);
    const firstChunk = JSON.parse(text.split('\n\n')[0]!.slice(6));
    expect(claims).toMatchObject({
      receipt_type: 'message',
      receipt_id: modelClaims.receipt_id,
      nonce: 'n-1',
      completion_id: firstChunk.id,
      request_hash: sha256(streamBody),
      response_hash: sha256(Buffer.from(text.slice(0, done))),
    });

    const fetched = await fetch(`${sigil.url}/v1/receipts/${claims.receipt_id}`, { headers: { authorization: `Bearer ${sigil.key}` } });
    expect(await fetched.json()).toEqual({ id: claims.receipt_id, receipt: messageJws });
  });

  it('serves a receipt only to the key that made the request', async () => {
    const res = await post(streamBody, { 'x-acme-receipt': 'true' });
    await res.text();
    const id = res.headers.get('x-acme-receipt-id')!;
    const other = await fetch(`${sigil.url}/v1/receipts/${id}`, { headers: { authorization: `Bearer ${sigil.otherKey}` } });
    expect(other.status).toBe(404);
    expect(await other.json()).toEqual({
      error: {
        message: 'No receipt with that id for this API key (it may have expired).',
        type: 'invalid_request_error',
        param: 'receipt_id',
        code: 'receipt_not_found',
      },
    });
    const anonymous = await fetch(`${sigil.url}/v1/receipts/${id}`);
    expect(anonymous.status).toBe(401);
  });

  it('issues no message receipt when the engine fails mid-stream', async () => {
    engine.behaviour = { dropAfterEvents: 2 };
    try {
      const res = await post(streamBody, { 'x-acme-receipt': 'true' });
      const text = await res.text();
      expect(text).not.toContain(': receipt ');
      expect(text).not.toContain('[DONE]');
      const fetched = await fetch(`${sigil.url}/v1/receipts/${res.headers.get('x-acme-receipt-id')}`, { headers: { authorization: `Bearer ${sigil.key}` } });
      expect(fetched.status).toBe(404);
    } finally {
      engine.behaviour = {};
    }
  });

  it('rewrites model in every chunk and hashes the rewritten bytes', async () => {
    const raw = JSON.stringify({ model: 'm2', messages: [{ role: 'user', content: 'x' }], stream: true });
    const res = await post(raw, { 'x-acme-receipt': 'true' });
    const text = await res.text();
    const done = text.indexOf('data: [DONE]\n\n') + 14;
    const events = text.slice(0, done).split('\n\n').filter(Boolean).slice(0, -1);
    expect(events.map((e) => JSON.parse(e.slice(6)).model)).toEqual(Array(12).fill('m2'));
    const claims = await verifyAsClient(text.slice(done + ': receipt '.length, -2));
    expect(claims.response_hash).toBe(sha256(Buffer.from(text.slice(0, done))));
  });
});

describe('tampering', () => {
  async function receipt(): Promise<string> {
    const res = await post(body, { 'x-acme-receipt': 'true' });
    await res.arrayBuffer();
    return res.headers.get('x-acme-receipt')!;
  }

  it('a changed payload no longer verifies', async () => {
    const [h, p, s] = (await receipt()).split('.');
    const claims = JSON.parse(Buffer.from(p!, 'base64url').toString());
    claims.nonce = 'forged';
    const forged = `${h}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${s}`;
    await expect(verifyAsClient(forged)).rejects.toThrow('signature verification failed');
  });

  it('a changed signature no longer verifies', async () => {
    const [h, p, s] = (await receipt()).split('.');
    const sig = Buffer.from(s!, 'base64url');
    sig[10] = sig[10]! ^ 0x01;
    await expect(verifyAsClient(`${h}.${p}.${sig.toString('base64url')}`)).rejects.toThrow('signature verification failed');
  });
});

describe('nonce rules', () => {
  it.each([['x'.repeat(257)], ['tab\there'], ['é']])('refuses the nonce %j with 400 and forwards nothing', async (nonce) => {
    const before = engine.requests.length;
    const res = await fetch(`${sigil.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${sigil.key}`,
        'content-type': 'application/json',
        'x-acme-receipt': 'true',
        'x-acme-nonce': encodeURI(nonce) === nonce ? nonce : Buffer.from(nonce).toString('latin1'),
      },
      body,
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: {
        message: 'The x-acme-nonce header must be 1 to 256 printable ASCII characters.',
        type: 'invalid_request_error',
        param: 'x-acme-nonce',
        code: 'invalid_nonce',
      },
    });
    expect(engine.requests.length).toBe(before);
  });

  it('accepts a 256-character nonce and echoes it', async () => {
    const nonce = '~'.repeat(256);
    const res = await post(body, { 'x-acme-receipt': 'true', 'x-acme-nonce': nonce });
    await res.arrayBuffer();
    expect((await verifyAsClient(res.headers.get('x-acme-receipt')!)).nonce).toBe(nonce);
  });
});
