import { VerifyError } from './errors.ts';
import type { VerifyErrorCode } from './errors.ts';

const BASE64URL = /^[A-Za-z0-9_-]*$/;

/**
 * Decodes unpadded base64url and refuses anything but its one canonical spelling
 * (no padding, no stray characters, no non-zero trailing bits), so one byte string has one encoding.
 */
export function decodeBase64url(text: string, code: VerifyErrorCode, what: string): Uint8Array {
  if (!BASE64URL.test(text) || text.length % 4 === 1) {
    throw new VerifyError(code, `${what} is not unpadded base64url`);
  }
  const bytes = Buffer.from(text, 'base64url');
  if (bytes.toString('base64url') !== text) {
    throw new VerifyError(code, `${what} is not canonical base64url`);
  }
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
