import { SIGNED_NONCE_TYP, startDocumentSha256 } from '../protocol/signed-nonce.ts';
import { field } from './binding.ts';
import { fail, pass, type Check } from './check.ts';
import { importJwks } from './jwks.ts';
import { verifyCompactJws } from './jws.ts';

const NAME = 'attestation.signed_nonce';

/**
 * Freshness from a signed nonce (docs/attestation.md): `signed` is our nonce signed by a key the start
 * document's hardware-signed binding names, and it speaks for that very document. Passing proves that
 * whoever holds that key (made in the enclave, `attestation.key_origin`) answered our nonce now; it does
 * not prove what a fresh report would (below, in the docs).
 */
export async function signedNonceCheck(signed: string, startDocument: unknown, nonce: Uint8Array): Promise<Check> {
  const nonceHex = Buffer.from(nonce).toString('hex');
  if (field(startDocument, 'nonce') !== '0'.repeat(64)) {
    return fail(
      NAME,
      `the document sent with the signed nonce is not the start evidence (its nonce is ${JSON.stringify(field(startDocument, 'nonce'))}, not all zeros)`,
    );
  }
  let claims: Record<string, unknown>;
  let kid: string | undefined;
  try {
    const keys = await importJwks(field(field(startDocument, 'binding'), 'jwks'));
    const verified = verifyCompactJws(signed, keys.keys);
    if (verified.header.typ !== SIGNED_NONCE_TYP)
      return fail(NAME, `the signed statement's typ is ${JSON.stringify(verified.header.typ)}, not ${SIGNED_NONCE_TYP}`);
    claims = JSON.parse(new TextDecoder().decode(verified.payload)) as Record<string, unknown>;
    kid = verified.key.kid;
  } catch (err) {
    return fail(NAME, `the nonce is not signed by a key the start evidence binds: ${(err as Error).message}`);
  }
  if (claims.nonce !== nonceHex) return fail(NAME, `the signed nonce is ${JSON.stringify(claims.nonce)}; we sent ${nonceHex}`);
  const digest = startDocumentSha256(startDocument);
  if (claims.start_document_sha256 !== digest) {
    return fail(NAME, `the signature speaks for start evidence ${JSON.stringify(claims.start_document_sha256)}, not the document sent with it (${digest})`);
  }
  return pass(
    NAME,
    `our fresh nonce ${nonceHex} is signed by the receipt key ${kid ?? '(no kid)'} the start evidence binds: that key's holder answered now; no new hardware report: the CPU and GPU reports are the start evidence, so their freshness rests on it (a fresh report answers the nonce itself)`,
  );
}
