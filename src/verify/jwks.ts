import { createPublicKey } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { calculateJwkThumbprint } from 'jose';
import { decodeBase64url } from './base64url.ts';
import { VerifyError } from './errors.ts';

/** The public half of a P-256 key, as the JWKS publishes it. */
export interface EcPublicJwk {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
  kid?: string;
  use?: 'sig';
  alg?: 'ES256';
}

/** A JWKS entry that passed every rule and may verify receipts. */
export interface VerificationKey {
  /** Position in the JWKS `keys` array. */
  index: number;
  kid?: string;
  /** RFC 7638 SHA-256 thumbprint (base64url); Sigil uses it as the `kid`. */
  thumbprint: string;
  jwk: EcPublicJwk;
  key: KeyObject;
}

/** A JWKS entry left out, and why. */
export interface SkippedKey {
  index: number;
  kid?: string;
  reason: string;
}

export interface ImportedJwks {
  keys: VerificationKey[];
  skipped: SkippedKey[];
}

/** Members that only private or symmetric keys carry. */
const SECRET_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Why a JWK may not verify ES256 receipts, or undefined when it may. */
function refusal(jwk: Record<string, unknown>): string | undefined {
  if (jwk.kty !== 'EC') return `kty is ${JSON.stringify(jwk.kty)}, not "EC"`;
  if (jwk.crv !== 'P-256') return `crv is ${JSON.stringify(jwk.crv)}, not "P-256"`;
  if (jwk.use !== undefined && jwk.use !== 'sig') return `use is ${JSON.stringify(jwk.use)}, not "sig"`;
  if (jwk.alg !== undefined && jwk.alg !== 'ES256') return `alg is ${JSON.stringify(jwk.alg)}, not "ES256"`;
  if (jwk.key_ops !== undefined && !(Array.isArray(jwk.key_ops) && jwk.key_ops.includes('verify'))) {
    return 'key_ops does not include "verify"';
  }
  for (const coordinate of ['x', 'y'] as const) {
    const value = jwk[coordinate];
    if (typeof value !== 'string') return `${coordinate} is missing`;
    try {
      if (decodeBase64url(value, 'ERR_JWKS_INVALID', coordinate).length !== 32) return `${coordinate} is not 32 bytes`;
    } catch (err) {
      return (err as Error).message;
    }
  }
  return undefined;
}

function publicJwk(jwk: Record<string, unknown>): EcPublicJwk {
  const out: EcPublicJwk = { kty: 'EC', crv: 'P-256', x: jwk.x as string, y: jwk.y as string };
  if (typeof jwk.kid === 'string') out.kid = jwk.kid;
  if (jwk.use === 'sig') out.use = 'sig';
  if (jwk.alg === 'ES256') out.alg = 'ES256';
  return out;
}

/**
 * Reads a JWKS and keeps the keys that may verify ES256 receipts: kty EC, crv P-256, a point on
 * the curve, `use` absent or "sig", `alg` absent or "ES256". Other keys are skipped with a reason.
 * A set with two equal `kid`s, or with any private or symmetric key material, is refused whole:
 * a service that publishes its private key proves nothing with its signatures.
 */
export async function importJwks(jwks: unknown): Promise<ImportedJwks> {
  if (!isObject(jwks) || !Array.isArray(jwks.keys)) throw new VerifyError('ERR_JWKS_INVALID');
  const seenKids = new Set<string>();
  for (const [index, entry] of jwks.keys.entries()) {
    if (!isObject(entry) || entry.kid === undefined) continue;
    if (typeof entry.kid !== 'string') throw new VerifyError('ERR_JWKS_INVALID', `key ${index}: kid is not a string`);
    if (seenKids.has(entry.kid)) throw new VerifyError('ERR_JWKS_DUPLICATE_KID', `two keys in the JWKS have kid ${JSON.stringify(entry.kid)}`);
    seenKids.add(entry.kid);
  }
  const keys: VerificationKey[] = [];
  const skipped: SkippedKey[] = [];
  for (const [index, entry] of jwks.keys.entries()) {
    if (!isObject(entry)) {
      skipped.push({ index, reason: 'not a JSON object' });
      continue;
    }
    const kid = typeof entry.kid === 'string' ? entry.kid : undefined;
    const secret = SECRET_MEMBERS.find((member) => member in entry);
    if (secret !== undefined) {
      throw new VerifyError('ERR_JWKS_PRIVATE_KEY', `key ${index} carries the private member "${secret}"`);
    }
    const reason = refusal(entry);
    const withKid = (item: SkippedKey): SkippedKey => (kid === undefined ? item : { ...item, kid });
    if (reason !== undefined) {
      skipped.push(withKid({ index, reason }));
      continue;
    }
    const jwk = publicJwk(entry);
    let key: KeyObject;
    try {
      // OpenSSL refuses a point that is not on the curve (or is the point at infinity).
      key = createPublicKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y }, format: 'jwk' });
    } catch {
      skipped.push(withKid({ index, reason: 'x, y is not a point on P-256' }));
      continue;
    }
    const thumbprint = await calculateJwkThumbprint({ kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y }, 'sha256');
    const accepted: VerificationKey = { index, thumbprint, jwk, key };
    if (kid !== undefined) accepted.kid = kid;
    keys.push(accepted);
  }
  return { keys, skipped };
}
