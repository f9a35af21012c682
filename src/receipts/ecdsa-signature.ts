/**
 * An ECDSA P-256 signature as JWS's ES256 wants it (RFC 7518 §3.4): r and s as two 32-byte big-endian
 * integers, from the DER `SEQUENCE { INTEGER r, INTEGER s }` OpenSSL makes. node:crypto can make that form
 * itself (`dsaEncoding: 'ieee-p1363'`), but on Node 24 the options object it needs doubles a signature's
 * CPU (56 against 26 µs, bench/README.md "A receipt at the cost of its signature"), so the signer passes the
 * bare key and re-encodes here. An encoding step, not cryptography: the signature's bytes are not touched.
 */

import { SigilError } from '../protocol/sigil-error.ts';

const SIZE = 32;

export class SignatureEncodingError extends SigilError<'ERR_SIGNATURE_ENCODING'> {
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_SIGNATURE_ENCODING', message, options);
  }
}

/** Copies one DER INTEGER's value, right-aligned, into `out` at `at`; returns the offset after it. */
function copyInteger(der: Buffer, offset: number, out: Buffer, at: number): number {
  if (der[offset] !== 0x02) throw new SignatureEncodingError('not a DER ECDSA P-256 signature: an INTEGER was expected');
  const length = der[offset + 1]!;
  const start = offset + 2;
  // 33 bytes only with a leading zero (the value's high bit set); never empty.
  if (length < 1 || length > SIZE + 1 || (length === SIZE + 1 && der[start] !== 0x00) || start + length > der.length) {
    throw new SignatureEncodingError('not a DER ECDSA P-256 signature: an integer of the wrong size');
  }
  // DER: no negative value (high bit of the first byte), no leading zero byte that is not needed.
  if ((der[start]! & 0x80) !== 0 || (length > 1 && der[start] === 0x00 && (der[start + 1]! & 0x80) === 0)) {
    throw new SignatureEncodingError('not a DER ECDSA P-256 signature: an integer not in minimal positive form');
  }
  const value = length === SIZE + 1 ? der.subarray(start + 1, start + length) : der.subarray(start, start + length);
  value.copy(out, at + SIZE - value.length);
  return start + length;
}

/** The 64-byte r‖s of a DER ECDSA P-256 signature. */
export function p1363FromDer(der: Buffer): Buffer {
  if (der.length < 8 || der[0] !== 0x30 || der[1] !== der.length - 2) {
    throw new SignatureEncodingError('not a DER ECDSA P-256 signature: not one SEQUENCE of its whole length');
  }
  const out = Buffer.alloc(2 * SIZE);
  const afterR = copyInteger(der, 2, out, 0);
  const afterS = copyInteger(der, afterR, out, SIZE);
  if (afterS !== der.length) throw new SignatureEncodingError('not a DER ECDSA P-256 signature: bytes after s');
  return out;
}
