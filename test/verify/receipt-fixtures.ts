import { generateKeyPairSync, sign as signBytes } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK } from 'jose';
import type { ReceiptClaims } from '../../src/verify/claims.ts';
import { sha256Tagged } from '../../src/verify/digest.ts';
import { isVerifyError } from '../../src/verify/errors.ts';
import { importJwks } from '../../src/verify/jwks.ts';
import { verifyCompactJws } from '../../src/verify/jws.ts';

/** A test signer: a fresh P-256 key pair, its public JWK (kid = RFC 7638 thumbprint) and a compact-JWS signer. */
export interface TestSigner {
  privateKey: KeyObject;
  publicJwk: Record<string, unknown>;
  kid: string;
  sign(payload: unknown, header?: Record<string, unknown>): string;
}

export function b64url(data: Uint8Array | string): string {
  return Buffer.from(data).toString('base64url');
}

/** Signs `header.payload` as ES256 with node:crypto, so tests can also craft headers a library would refuse to emit. */
export function signCompact(privateKey: KeyObject, header: Record<string, unknown>, payload: unknown): string {
  const input = `${b64url(JSON.stringify(header))}.${b64url(typeof payload === 'string' ? payload : JSON.stringify(payload))}`;
  const signature = signBytes('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' });
  return `${input}.${b64url(signature)}`;
}

export async function makeSigner(curve: 'P-256' | 'P-384' = 'P-256'): Promise<TestSigner> {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: curve });
  const jwk = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(jwk, 'sha256');
  const publicJwk = { ...jwk, kid, use: 'sig', alg: 'ES256' };
  return {
    privateKey,
    publicJwk,
    kid,
    sign: (payload, header) => signCompact(privateKey, header ?? { alg: 'ES256', typ: 'JWT', kid }, payload),
  };
}

export const MEASUREMENT = 'ab'.repeat(48);
export const POLICY_HASH = sha256Tagged('{"policy":1}');
export const REQUEST_BYTES = Buffer.from('{"model":"m1","messages":[{"role":"user","content":"hi"}]}');
export const RESPONSE_BYTES = Buffer.from('{"id":"chatcmpl-1","object":"chat.completion","choices":[]}');

export function messageClaims(overrides: Partial<ReceiptClaims> = {}): ReceiptClaims {
  const now = new Date();
  return {
    schema_version: '1.0.0',
    receipt_type: 'message',
    receipt_id: 'rcpt_0001',
    enclave_measurement: MEASUREMENT,
    tee: 'sev-snp',
    policy_hash: POLICY_HASH,
    selected_model: { provider: 'acme', model_id: 'm1', model_hash: 'sha256:' + '0'.repeat(64) },
    nonce: 'n-123',
    issued_at: now.toISOString().replace(/\.\d{3}Z$/, 'Z'),
    iat: Math.floor(now.getTime() / 1000),
    attestation_hash: sha256Tagged('evidence'),
    completion_id: 'chatcmpl-1',
    request_hash: sha256Tagged(REQUEST_BYTES),
    response_hash: sha256Tagged(RESPONSE_BYTES),
    ...overrides,
  };
}

/** Runs a JWS through the receipt path (JWKS import, then compact verify): "valid", or the VerifyError code. A lone key is wrapped in a JWKS. */
export async function verifyOutcome(jws: string, keyset: unknown): Promise<string> {
  const jwks = typeof keyset === 'object' && keyset !== null && 'keys' in keyset ? keyset : { keys: [keyset] };
  try {
    verifyCompactJws(jws, (await importJwks(jwks)).keys);
    return 'valid';
  } catch (err) {
    if (isVerifyError(err)) return err.code;
    throw err;
  }
}
