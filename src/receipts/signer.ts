import { sign } from 'node:crypto';
import { p1363FromDer } from './ecdsa-signature.ts';
import type { SigningKey } from './signing-key.ts';
import type { ReceiptClaims } from './claims.ts';

/**
 * Signs a receipt: on libuv's thread pool when a core is free for it (the event loop relays other requests
 * while OpenSSL works), else on the calling thread; a promise either way.
 */
export type SignReceipt = (claims: ReceiptClaims) => Promise<string>;

/** ES256: SHA-256; OpenSSL's DER signature becomes JWS's r‖s in p1363FromDer (cheaper than node:crypto's dsaEncoding option). */
const DIGEST = 'sha256';

/** `header.payload` of a compact JWS: the protected header never changes for a key, so it is encoded once. */
function signingInputOf<Claims>(key: SigningKey, typ: string): (claims: Claims) => string {
  const header = Buffer.from(JSON.stringify({ alg: 'ES256', typ, kid: key.kid })).toString('base64url');
  return (claims) => `${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
}

/** Compact ES256 JWS over JSON claims under `typ`, signed on the calling thread (for the rare signed nonce). */
export function createJwsSigner<Claims>(key: SigningKey, typ: string): (claims: Claims) => string {
  const signingInput = signingInputOf<Claims>(key, typ);
  const { privateKey } = key;
  return (claims) => {
    const input = signingInput(claims);
    return `${input}.${p1363FromDer(sign(DIGEST, Buffer.from(input), privateKey)).toString('base64url')}`;
  };
}

/** The same JWS, its signature made on libuv's thread pool (node:crypto's `sign` with a callback). */
export function createAsyncJwsSigner<Claims>(key: SigningKey, typ: string): (claims: Claims) => Promise<string> {
  const signingInput = signingInputOf<Claims>(key, typ);
  const { privateKey } = key;
  return (claims) => {
    const input = signingInput(claims);
    return new Promise((resolve, reject) => {
      sign(DIGEST, Buffer.from(input), privateKey, (err, der) => {
        if (err) return reject(err);
        try {
          resolve(`${input}.${p1363FromDer(der).toString('base64url')}`);
        } catch (encodingError) {
          reject(encodingError as Error);
        }
      });
    });
  };
}

/**
 * The receipt signer. `onThreadPool` (src/config/workers.ts `signsOnThreadPool`): only when a core is free for the
 * pool's thread; without one, signing on the event loop costs less CPU than handing each signature over.
 */
export function createReceiptSigner(key: SigningKey, onThreadPool = true): SignReceipt {
  if (onThreadPool) return createAsyncJwsSigner<ReceiptClaims>(key, 'JWT');
  const sign = createJwsSigner<ReceiptClaims>(key, 'JWT');
  return (claims) => {
    try {
      return Promise.resolve(sign(claims));
    } catch (err) {
      return Promise.reject(err as Error);
    }
  };
}
