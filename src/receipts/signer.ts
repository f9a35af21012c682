import { sign } from 'node:crypto';
import type { SigningKey } from './signing-key.ts';
import type { ReceiptClaims } from './claims.ts';

export type SignReceipt = (claims: ReceiptClaims) => string;

/**
 * Compact ES256 JWS over JSON claims under `typ`. node:crypto signs synchronously on the hot path; the
 * protected header never changes for a key, so it is encoded once.
 */
export function createJwsSigner<Claims>(key: SigningKey, typ: string): (claims: Claims) => string {
  const header = Buffer.from(JSON.stringify({ alg: 'ES256', typ, kid: key.kid })).toString('base64url');
  const { privateKey } = key;
  return (claims) => {
    const signingInput = `${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
    const signature = sign('sha256', Buffer.from(signingInput), { key: privateKey, dsaEncoding: 'ieee-p1363' });
    return `${signingInput}.${signature.toString('base64url')}`;
  };
}

export function createReceiptSigner(key: SigningKey): SignReceipt {
  return createJwsSigner<ReceiptClaims>(key, 'JWT');
}
