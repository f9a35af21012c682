import { createHash } from 'node:crypto';
import { canonicalJson } from '../digest.ts';

/** SPEC 5: REPORT_DATA = SHA-512(nonce bytes || UTF-8 of the JCS (RFC 8785) canonical JWKS). */
export function expectedReportData(nonce: Uint8Array, jwks: { keys: object[] }): Uint8Array {
  return createHash('sha512').update(nonce).update(canonicalJson(jwks), 'utf8').digest();
}
