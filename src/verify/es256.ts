import { verify } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { VerifyError } from './errors.ts';

/** The order n of the P-256 group. */
export const P256_ORDER = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;

export const ES256_SIGNATURE_BYTES = 64;

function scalar(bytes: Uint8Array): bigint {
  return BigInt('0x' + Buffer.from(bytes).toString('hex'));
}

/** RFC 7518 3.4: exactly 64 bytes, r||s, each a big-endian integer in [1, n-1]. DER and longer forms are refused. */
export function assertEs256SignatureEncoding(signature: Uint8Array): void {
  if (signature.length !== ES256_SIGNATURE_BYTES) {
    throw new VerifyError('ERR_RECEIPT_SIGNATURE_ENCODING', `the signature is ${signature.length} bytes; ES256 needs exactly 64 (r||s)`);
  }
  const r = scalar(signature.subarray(0, 32));
  const s = scalar(signature.subarray(32, 64));
  if (r < 1n || r >= P256_ORDER) throw new VerifyError('ERR_RECEIPT_SIGNATURE_ENCODING', 'r is outside [1, n-1]');
  if (s < 1n || s >= P256_ORDER) throw new VerifyError('ERR_RECEIPT_SIGNATURE_ENCODING', 's is outside [1, n-1]');
}

/**
 * ECDSA P-256 SHA-256 over `signingInput`, by node:crypto (OpenSSL). Throws on a malformed signature,
 * returns false on a well-formed one that does not verify. High-S and low-S forms both verify.
 */
export function verifyEs256(key: KeyObject, signingInput: Uint8Array, signature: Uint8Array): boolean {
  assertEs256SignatureEncoding(signature);
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') return false;
  return verify('sha256', signingInput, { key, dsaEncoding: 'ieee-p1363' }, signature);
}
