import { SIGNED_NONCE_TYP, startDocumentSha256, type SignedNonceClaims } from '../protocol/signed-nonce.ts';
import { createJwsSigner } from './signer.ts';
import type { SigningKey } from './signing-key.ts';

export type SignNonce = (nonce: Uint8Array, startDocument: object) => string;

/**
 * Signs a client's nonce with the receipt key, which the start evidence binds (docs/attestation.md,
 * "Freshness from a signed nonce"): one ES256 signature, where a fresh hardware report takes the hardware.
 */
export function createNonceSigner(key: SigningKey): SignNonce {
  const sign = createJwsSigner<SignedNonceClaims>(key, SIGNED_NONCE_TYP);
  // The start document changes only on reload (a new object): its digest is computed once per document.
  const digests = new WeakMap<object, string>();
  const digestOf = (doc: object) => digests.get(doc) ?? digests.set(doc, startDocumentSha256(doc)).get(doc)!;
  return (nonce, startDocument) =>
    sign({ nonce: Buffer.from(nonce).toString('hex'), start_document_sha256: digestOf(startDocument), iat: Math.floor(Date.now() / 1000) });
}
