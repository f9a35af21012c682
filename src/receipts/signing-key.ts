import { createECDH, createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { calculateJwkThumbprint, type JWK } from 'jose';
import type { KeyOrigin } from '../protocol/attestation.ts';
import { SigilError } from '../protocol/sigil-error.ts';

/** The receipt signing key: private half stays in this process, public half goes to the JWKS. */
export interface SigningKey {
  privateKey: KeyObject;
  /** Public JWK with `kid` (RFC 7638 thumbprint), `use: sig`, `alg: ES256`. */
  publicJwk: JWK & { kid: string };
  kid: string;
  /** Where the key came from, for the start-up log line (never the key). */
  origin: 'generated' | 'loaded' | 'generated-and-saved' | 'sealed';
  /** The file it was read from or saved to, when there is one. */
  file?: string;
  /** A sealed key: what the TEE bound it to. */
  boundTo?: string;
}

/**
 * The origin the binding declares. A key saved to a file in clear is declared `loaded` even on the start that made it:
 * from then on the host can read it, and the next start reads it back, so it is no longer a key only the enclave holds.
 */
export function receiptKeyOrigin(key: SigningKey): KeyOrigin {
  if (key.origin === 'sealed') return { origin: 'sealed', bound_to: key.boundTo! };
  return key.origin === 'generated' || key.file === undefined ? { origin: 'generated' } : { origin: 'loaded', file: key.file };
}

export class SigningKeyError extends SigilError<'ERR_SIGNING_KEY'> {
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_SIGNING_KEY', message, options);
  }
}

async function describe(privateKey: KeyObject, origin: SigningKey['origin']): Promise<SigningKey> {
  const { kty, crv, x, y } = createPublicKey(privateKey).export({ format: 'jwk' });
  if (kty !== 'EC' || crv !== 'P-256') throw new SigningKeyError(`receipt keys must be EC P-256, got ${kty} ${crv ?? ''}`);
  const kid = await calculateJwkThumbprint({ kty, crv, x, y }, 'sha256');
  return { privateKey, publicJwk: { kty, crv, x, y, kid, use: 'sig', alg: 'ES256' }, kid, origin };
}

/** The key a primary made or loaded, rebuilt in a worker from its PKCS#8 DER (received over IPC, never from disk). */
export async function signingKeyFromPkcs8(pkcs8: Uint8Array, origin: SigningKey['origin'], file?: string): Promise<SigningKey> {
  const key = await describe(createPrivateKey({ key: Buffer.from(pkcs8), format: 'der', type: 'pkcs8' }), origin);
  return file === undefined ? key : { ...key, file };
}

/**
 * With no key file, a fresh key pair is made in memory at every start. With a key file that exists,
 * the PKCS#8 PEM key in it is used; with one that does not exist yet, a new key is written there (0600).
 */
export async function loadSigningKey(keyFile?: string): Promise<SigningKey> {
  if (keyFile === undefined) {
    return describe(generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey, 'generated');
  }
  if (existsSync(keyFile)) {
    let key: KeyObject;
    try {
      key = createPrivateKey(readFileSync(keyFile));
    } catch (err) {
      throw new SigningKeyError(`receipts.key_file ${keyFile}: not a PEM private key (${(err as Error).message})`);
    }
    return { ...(await describe(key, 'loaded')), file: keyFile };
  }
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  mkdirSync(dirname(keyFile), { recursive: true });
  writeFileSync(keyFile, privateKey.export({ format: 'pem', type: 'pkcs8' }), { mode: 0o600 });
  return { ...(await describe(privateKey, 'generated-and-saved')), file: keyFile };
}

/** P-256's group order n. */
const P256_ORDER = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
/** Bytes of key material a sealed receipt key takes: 256 bits and 64 more, so reducing them modulo n is unbiased. */
export const SEALED_KEY_MATERIAL_BYTES = 40;

/**
 * The receipt key derived from sealed key material (FIPS 186-5 A.2.1: d = (c mod (n - 1)) + 1), the same key for the
 * same material on every start. The public point comes from node:crypto's ECDH on that scalar.
 */
export async function sealedSigningKey(material: Buffer, boundTo: string): Promise<SigningKey> {
  if (material.length !== SEALED_KEY_MATERIAL_BYTES) throw new SigningKeyError(`a sealed receipt key needs ${SEALED_KEY_MATERIAL_BYTES} bytes of key material`);
  const d = (BigInt(`0x${material.toString('hex')}`) % (P256_ORDER - 1n)) + 1n;
  const scalar = Buffer.from(d.toString(16).padStart(64, '0'), 'hex');
  const ecdh = createECDH('prime256v1');
  ecdh.setPrivateKey(scalar);
  const point = ecdh.getPublicKey();
  const b64 = (bytes: Buffer) => bytes.toString('base64url');
  const privateKey = createPrivateKey({
    key: { kty: 'EC', crv: 'P-256', d: b64(scalar), x: b64(point.subarray(1, 33)), y: b64(point.subarray(33, 65)) },
    format: 'jwk',
  });
  return { ...(await describe(privateKey, 'sealed')), boundTo };
}
