import { createHash } from 'node:crypto';
import canonicalizeModule from 'canonicalize';
import { compactVerify, importJWK, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** GET /v1/verify/attestation?nonce=HEX&proof=signature (docs/api.md; docs/attestation.md, "Freshness from a signed nonce"). */
const canonicalize = canonicalizeModule as unknown as (v: unknown) => string;
let engine: TestEngine;
let sigil: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'm' }],
    config: { limits: { signed_nonce_burst: 3, signed_nonces_per_s: 0.001 } },
  });
});
afterAll(async () => {
  await sigil.close(0);
  await engine.close();
});

const get = async (query: string) => {
  const res = await fetch(`${sigil.url}/v1/verify/attestation${query}`);
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
};
const NONCE = 'ab'.repeat(32);

describe('a signed nonce', () => {
  it('is the start evidence as served without a nonce, and the nonce signed by the receipt key it binds, naming that document', async () => {
    const start = await get('');
    const { status, headers, body } = await get(`?nonce=${NONCE}&proof=signature`);
    expect(status).toBe(200);
    expect(headers.get('cache-control')).toBe('no-store');
    expect(body.attestation).toEqual(start.body);
    const jwks = (start.body.binding as { jwks: { keys: JWK[] } }).jwks;
    const { payload, protectedHeader } = await compactVerify(body.signed_nonce as string, await importJWK(jwks.keys[0]!, 'ES256'));
    expect(protectedHeader).toEqual({ alg: 'ES256', typ: 'sigil-signed-nonce+jwt', kid: jwks.keys[0]!.kid });
    const claims = JSON.parse(new TextDecoder().decode(payload)) as Record<string, unknown>;
    expect(claims).toEqual({
      nonce: NONCE,
      start_document_sha256: 'sha256:' + createHash('sha256').update(canonicalize(start.body)).digest('hex'),
      iat: expect.any(Number),
    });
    expect(Math.abs((claims.iat as number) - Date.now() / 1000)).toBeLessThan(5);
  });

  it('refuses an unknown proof and a signature without a nonce, OpenAI-shaped', async () => {
    expect(await get(`?nonce=${NONCE}&proof=quote`)).toMatchObject({
      status: 400,
      body: { error: { type: 'invalid_request_error', code: 'invalid_value', param: 'proof' } },
    });
    expect(await get('?proof=signature')).toMatchObject({
      status: 400,
      body: { error: { type: 'invalid_request_error', code: 'missing_required_parameter', param: 'nonce' } },
    });
  });

  it('has its own allowance per client: past it 429 with Retry-After, while hardware reports still answer', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await get(`?nonce=${i.toString(16).padStart(64, '0')}&proof=signature`)).status);
    expect(statuses.slice(-2)).toEqual([429, 429]);
    const limited = await get(`?nonce=${'cd'.repeat(32)}&proof=signature`);
    expect(limited.headers.get('retry-after')).toBe('1');
    expect(limited.body).toMatchObject({ error: { type: 'requests', code: 'rate_limit_exceeded' } });
    expect((await get(`?nonce=${'ef'.repeat(32)}`)).status).toBe(200);
  });
});
