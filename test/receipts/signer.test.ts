import { compactVerify, decodeProtectedHeader, importJWK } from 'jose';
import { describe, expect, it } from 'vitest';
import { createJwsSigner, createReceiptSigner } from '../../src/receipts/signer.ts';
import { loadSigningKey } from '../../src/receipts/signing-key.ts';
import { RECEIPT_SCHEMA_VERSION, type ReceiptClaims } from '../../src/receipts/claims.ts';

/** src/receipts/signer.ts: compact ES256 JWS, signed on libuv's thread pool for receipts, on the caller's thread for nonces. */
const claims: ReceiptClaims = {
  schema_version: RECEIPT_SCHEMA_VERSION,
  receipt_type: 'message',
  receipt_id: '7d4f0b6e-1c2a-4b1e-9d57-0c6f2f9b8a11',
  enclave_measurement: '0'.repeat(96),
  tee: 'none',
  policy_hash: 'sha256:' + 'ab'.repeat(32),
  selected_model: { provider: 'p', model_id: 'm', model_hash: 'sha256:' + 'cd'.repeat(32) },
  nonce: 'n-ü',
  issued_at: '2026-11-27T12:00:00Z',
  iat: 1795780800,
  completion_id: 'chatcmpl-1',
  request_hash: 'sha256:' + '01'.repeat(32),
  response_hash: 'sha256:' + '02'.repeat(32),
};

describe('the receipt signer', () => {
  it('gives a JWS that verifies with the JWKS key, with the same protected header and payload bytes as the synchronous signer', async () => {
    const key = await loadSigningKey();
    const pending = createReceiptSigner(key)(claims);
    expect(pending).toBeInstanceOf(Promise);
    const jws = await pending;
    const sync = createJwsSigner<ReceiptClaims>(key, 'JWT')(claims);
    const [header, payload, signature] = jws.split('.');
    expect(`${header}.${payload}`).toBe(sync.split('.').slice(0, 2).join('.'));
    // IEEE P1363: r and s, 32 bytes each (not DER), as JWS's ES256 requires.
    expect(Buffer.from(signature!, 'base64url')).toHaveLength(64);
    expect(decodeProtectedHeader(jws)).toEqual({ alg: 'ES256', typ: 'JWT', kid: key.kid });
    const verified = await compactVerify(jws, await importJWK(key.publicJwk, 'ES256'), { algorithms: ['ES256'] });
    expect(JSON.parse(new TextDecoder().decode(verified.payload))).toEqual(claims);
    await expect(compactVerify(sync, await importJWK(key.publicJwk, 'ES256'), { algorithms: ['ES256'] })).resolves.toBeDefined();
  });

  it('signs on the calling thread when asked to, with the same bytes before the signature and a signature that verifies', async () => {
    const key = await loadSigningKey();
    const onLoop = createReceiptSigner(key, false)(claims);
    expect(onLoop).toBeInstanceOf(Promise);
    const jws = await onLoop;
    const pooled = await createReceiptSigner(key, true)(claims);
    expect(jws.split('.').slice(0, 2)).toEqual(pooled.split('.').slice(0, 2));
    const verified = await compactVerify(jws, await importJWK(key.publicJwk, 'ES256'), { algorithms: ['ES256'] });
    expect(JSON.parse(new TextDecoder().decode(verified.payload))).toEqual(claims);
  });

  it('signs many receipts at once, each verifying for its own claims', async () => {
    const key = await loadSigningKey();
    const sign = createReceiptSigner(key);
    const ids = Array.from({ length: 32 }, (_, i) => `receipt-${i}`);
    const signed = await Promise.all(ids.map((receipt_id) => sign({ ...claims, receipt_id })));
    const publicKey = await importJWK(key.publicJwk, 'ES256');
    for (const [i, jws] of signed.entries()) {
      const { payload } = await compactVerify(jws, publicKey, { algorithms: ['ES256'] });
      expect((JSON.parse(new TextDecoder().decode(payload)) as ReceiptClaims).receipt_id).toBe(ids[i]);
    }
  });
});
