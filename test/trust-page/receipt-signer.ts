import { CompactSign, exportJWK, generateKeyPair, calculateJwkThumbprint } from 'jose';

/** A receipt signed with jose (WebCrypto), independent of the node:crypto adapter under test. */
export async function signReceiptForTest(): Promise<{ jws: string; jwks: { keys: unknown[] } }> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const jwk = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(jwk);
  const now = new Date();
  const claims = {
    schema_version: '1.0.0',
    receipt_type: 'model',
    receipt_id: '6a1f7d2e-0c4b-4e7a-9b1d-3f2a5c6d7e8f',
    enclave_measurement: '0'.repeat(96),
    tee: 'none',
    policy_hash: 'sha256:' + '1'.repeat(64),
    selected_model: { provider: 'p', model_id: 'm', model_hash: 'sha256:' + '2'.repeat(64) },
    nonce: 'n-1',
    issued_at: now.toISOString().replace(/\.\d{3}Z$/, 'Z'),
    iat: Math.floor(now.getTime() / 1000),
  };
  const jws = await new CompactSign(new TextEncoder().encode(JSON.stringify(claims))).setProtectedHeader({ alg: 'ES256', typ: 'JWT', kid }).sign(privateKey);
  return { jws, jwks: { keys: [{ ...jwk, kid, use: 'sig', alg: 'ES256' }] } };
}
