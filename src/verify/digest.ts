import { createHash } from 'node:crypto';
import canonicalizeModule from 'canonicalize';
import { VerifyError } from './errors.ts';

// The package is CommonJS with an ESM-style `export default` typing: at runtime the default import is the function itself.
const canonicalize = canonicalizeModule as unknown as (input: unknown) => string | undefined;

/** `"sha256:" + hex`, the form of every hash claim in a receipt. */
export function sha256Tagged(bytes: Uint8Array | string): string {
  return 'sha256:' + createHash('sha256').update(bytes).digest('hex');
}

/** RFC 8785 (JCS) canonical JSON text. */
export function canonicalJson(value: unknown): string {
  let text: string | undefined;
  try {
    text = canonicalize(value);
  } catch (err) {
    throw new VerifyError('ERR_JCS', `cannot canonicalize: ${(err as Error).message}`);
  }
  if (text === undefined) throw new VerifyError('ERR_JCS');
  return text;
}

/** SPEC 3: `policy_hash` = "sha256:" + hex SHA-256 of the JCS-canonical policy document (GET /v1/verify/policy). */
export function canonicalPolicyHash(policyDoc: unknown): string {
  return sha256Tagged(canonicalJson(policyDoc));
}
