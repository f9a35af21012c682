import { canonicalJson as protocolCanonicalJson, sha256Tagged } from '../protocol/jcs.ts';
import { VerifyError } from './errors.ts';

export { sha256Tagged };

/** RFC 8785 (JCS) canonical JSON text: the protocol's, failing with the verifier's error code. */
export function canonicalJson(value: unknown): string {
  try {
    return protocolCanonicalJson(value);
  } catch (err) {
    throw new VerifyError('ERR_JCS', `cannot canonicalize: ${(err as Error).message}`);
  }
}

/** docs/receipts.md: `policy_hash` = "sha256:" + hex SHA-256 of the JCS-canonical policy document (GET /v1/verify/policy). */
export function canonicalPolicyHash(policyDoc: unknown): string {
  return sha256Tagged(canonicalJson(policyDoc));
}
