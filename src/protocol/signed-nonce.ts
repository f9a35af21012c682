import { jcsSha256 } from './jcs.ts';

/**
 * Freshness without a new hardware report (docs/attestation.md, "Freshness from a signed nonce"): the
 * enclave signs the client's nonce with the receipt key its start evidence binds. The server that signs
 * and the verifier that checks share these definitions.
 */

/** The JWS `typ` of a signed nonce: never a receipt's (`JWT`), so neither can pass for the other. */
export const SIGNED_NONCE_TYP = 'sigil-signed-nonce+jwt';

/** What the enclave signs: the client's nonce and which start evidence it speaks for. */
export interface SignedNonceClaims {
  /** The client's 32-byte nonce, lowercase hex. */
  nonce: string;
  /** `"sha256:" + hex` of the RFC 8785 form of the start attestation document sent with it. */
  start_document_sha256: string;
  /** When it was signed, in seconds. */
  iat: number;
}

/** GET /v1/verify/attestation?nonce=HEX&proof=signature answers with this: both from the one replica that signed. */
export interface SignedNonceResponse {
  /** The attestation document made at start (all-zero nonce), as GET /v1/verify/attestation serves it. */
  attestation: unknown;
  /** Compact ES256 JWS of SignedNonceClaims, under a key in `attestation.binding.jwks`. */
  signed_nonce: string;
}

/** `start_document_sha256` of a start document. */
export function startDocumentSha256(document: unknown): string {
  return jcsSha256(document);
}
