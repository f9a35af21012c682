import { SigilError } from '../protocol/sigil-error.ts';

/** Every error the verifier throws, by stable code. Callers branch on `code`, never on the message. */
export const VERIFY_ERROR_CODES = {
  ERR_RECEIPT_FORMAT: 'not a compact JWS (three base64url parts, a JSON object header)',
  ERR_RECEIPT_ALG: 'the protected header alg is not ES256',
  ERR_RECEIPT_HEADER: 'the protected header carries a parameter the verifier refuses',
  ERR_RECEIPT_SIGNATURE_ENCODING: 'the signature is not 64 bytes of r||s with r and s in [1, n-1]',
  ERR_RECEIPT_SIGNATURE: 'no acceptable key in the JWKS verifies the signature',
  ERR_JWKS_INVALID: 'the JWKS is not an object with a keys array',
  ERR_JWKS_DUPLICATE_KID: 'two keys in the JWKS share a kid',
  ERR_JWKS_PRIVATE_KEY: 'the JWKS publishes private or symmetric key material',
  ERR_JWKS_NO_USABLE_KEY: 'the JWKS holds no P-256 signature key',
  ERR_JCS: 'the value cannot be canonicalized (RFC 8785)',
  ERR_VERIFY_FETCH: 'a request to the service failed',
  ERR_VERIFY_TLS_PIN: 'the server presented a TLS key other than the one the enclave attests',
  ERR_VERIFY_ATTESTATION: "the service's attestation did not verify",
  ERR_VERIFY_RECEIPT: 'a receipt did not verify',
  ERR_VERIFY_UNSEALED_RESPONSE: 'the answer to a sealed request is not sealed, so it may not come from the enclave',
  ERR_VERIFY_NONCE: "the app's X-<Brand>-Nonce is one the service would refuse, so nothing was sent",
  ERR_VERIFY_STREAM: 'the event stream does not end with data: [DONE] and a receipt comment',
} as const;

export type VerifyErrorCode = keyof typeof VERIFY_ERROR_CODES;

/** A receipt, JWKS or service that did not verify, or could not be fetched. */
export class VerifyError extends SigilError<VerifyErrorCode> {
  constructor(code: VerifyErrorCode, message: string = VERIFY_ERROR_CODES[code]) {
    super(code, message);
  }
}

export function isVerifyError(err: unknown): err is VerifyError {
  return err instanceof VerifyError;
}
