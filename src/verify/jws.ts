import { decodeBase64url } from './base64url.ts';
import { verifyEs256 } from './es256.ts';
import { VerifyError } from './errors.ts';
import type { VerificationKey } from './jwks.ts';

/** The protected header members a receipt may carry; anything else (jwk, jku, x5u, x5c, crit, b64, ...) is refused. */
const ALLOWED_HEADER = new Set(['alg', 'typ', 'kid']);

/** Header members that would point the verifier at a key the signer chose; named plainly when refused. */
const KEY_POINTERS: Record<string, string> = {
  jwk: 'an embedded jwk',
  jku: 'a jku URL',
  x5u: 'an x5u URL',
  x5c: 'an embedded x5c chain',
  x5t: 'an x5t thumbprint',
  'x5t#S256': 'an x5t#S256 thumbprint',
  crit: 'crit extensions',
};

export interface ProtectedHeader {
  alg: 'ES256';
  typ?: string;
  kid?: string;
}

export interface VerifiedJws {
  header: ProtectedHeader;
  payload: Uint8Array;
  /** The key that verified the signature. */
  key: VerificationKey;
}

function parseHeader(encoded: string): ProtectedHeader {
  const bytes = decodeBase64url(encoded, 'ERR_RECEIPT_FORMAT', 'the protected header');
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    throw new VerifyError('ERR_RECEIPT_FORMAT', 'the protected header is not UTF-8 JSON');
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) {
    throw new VerifyError('ERR_RECEIPT_FORMAT', 'the protected header is not a JSON object');
  }
  const fields = header as Record<string, unknown>;
  if (fields.alg !== 'ES256') {
    throw new VerifyError('ERR_RECEIPT_ALG', `alg is ${JSON.stringify(fields.alg)}; only ES256 is accepted`);
  }
  for (const name of Object.keys(fields)) {
    if (ALLOWED_HEADER.has(name)) continue;
    const pointer = KEY_POINTERS[name];
    throw new VerifyError(
      'ERR_RECEIPT_HEADER',
      pointer === undefined
        ? `header parameter "${name}" is refused; a receipt header holds only alg, typ and kid`
        : `header parameter "${name}" (${pointer}) is refused; keys come only from the JWKS you supply`,
    );
  }
  if (fields.typ !== undefined && typeof fields.typ !== 'string') throw new VerifyError('ERR_RECEIPT_FORMAT', 'typ is not a string');
  if (fields.kid !== undefined && typeof fields.kid !== 'string') throw new VerifyError('ERR_RECEIPT_FORMAT', 'kid is not a string');
  return fields as unknown as ProtectedHeader;
}

/**
 * Verifies a compact JWS signed with ES256 against every key given, in order: a key that fails is
 * skipped and the next is tried; the header `kid` only picks which key is tried first.
 * Throws a VerifyError (ERR_RECEIPT_*) when the token is malformed, refused or verifies under no key.
 * Checks only the signature: no `exp`/`nbf` processing, which is the receipt checks' business.
 */
export function verifyCompactJws(jws: string, keys: readonly VerificationKey[]): VerifiedJws {
  const parts = jws.split('.');
  if (parts.length !== 3) throw new VerifyError('ERR_RECEIPT_FORMAT', `a compact JWS has 3 parts; this has ${parts.length}`);
  const [encodedHeader, encodedPayload, encodedSignature] = parts as [string, string, string];
  if (encodedHeader === '') throw new VerifyError('ERR_RECEIPT_FORMAT', 'the protected header is empty');
  const header = parseHeader(encodedHeader);
  const payload = decodeBase64url(encodedPayload, 'ERR_RECEIPT_FORMAT', 'the payload');
  const signature = decodeBase64url(encodedSignature, 'ERR_RECEIPT_SIGNATURE_ENCODING', 'the signature');
  if (keys.length === 0) throw new VerifyError('ERR_JWKS_NO_USABLE_KEY');
  const signingInput = Buffer.from(`${encodedHeader}.${encodedPayload}`, 'ascii');
  const ordered = [...keys].sort((a, b) => Number(b.kid === header.kid) - Number(a.kid === header.kid));
  for (const key of ordered) {
    if (verifyEs256(key.key, signingInput, signature)) return { header, payload, key };
  }
  throw new VerifyError('ERR_RECEIPT_SIGNATURE', `none of the ${keys.length} acceptable key(s) verifies the signature`);
}
