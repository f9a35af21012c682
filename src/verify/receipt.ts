import { fail, pass, waive } from './check.ts';
import type { Check } from './check.ts';
import { receiptShapeProblems } from './claims.ts';
import type { ReceiptClaims } from './claims.ts';
import { sha256Tagged } from './digest.ts';
import { describeError } from '../protocol/sigil-error.ts';
import { ENDPOINTS_BEFORE_ENDPOINT_CLAIM } from '../protocol/receipt-claims.ts';
import { importJwks } from './jwks.ts';
import type { ImportedJwks } from './jwks.ts';
import { verifyCompactJws } from './jws.ts';
import type { VerifiedJws } from './jws.ts';

/**
 * What the client knows independently of the receipt; each given value becomes one check. The
 * measurement and the policy hash (and for a message receipt the request and response bytes) are
 * required: one that is neither given nor waived (VerifyReceiptOptions.waive) is a FAIL, never a
 * silent pass. The others are checked when given.
 */
export interface ReceiptExpectations {
  /** The X-Service-Nonce the client sent; omitted means it sent none, so the receipt must say "". */
  nonce?: string;
  /** Lowercase hex launch digest the client trusts (from verified attestation evidence or a reproducible build). */
  measurement?: string;
  /** `"sha256:" + hex`, e.g. canonicalPolicyHash(the fetched policy document). */
  policyHash?: string;
  /** The exact request body bytes the client sent. */
  requestBytes?: Uint8Array;
  /** The exact response body bytes received (for streams: up to and including `data: [DONE]\n\n`). */
  responseBytes?: Uint8Array;
  receiptType?: 'model' | 'message';
  modelId?: string;
  /** `"sha256:" + hex` of the start evidence, when the client fetched it. */
  attestationHash?: string;
  /** The `id` of the completion the client received (message receipts). */
  completionId?: string;
  /** The path the request was made on (`/v1/messages`): the receipt's `endpoint` must name it. */
  endpoint?: string;
}

/** The expectations a verification must have, unless the caller waives them with a reason. */
export type RequiredExpectation = 'measurement' | 'policyHash' | 'requestBytes' | 'responseBytes';

export interface VerifyReceiptOptions {
  jwks: { keys: unknown[] };
  expected?: ReceiptExpectations;
  /**
   * Required expectations the caller chooses not to check, each with the reason shown in the report
   * (e.g. `{ requestBytes: 'the request was not kept' }`): reported as waived, not as passed.
   */
  waive?: Partial<Record<RequiredExpectation, string>>;
  /** Make `receipt.tee` pass for tee "none" (development only). Default false. */
  allowNoTee?: boolean;
  /** Clock for the issued_at check; default now. */
  now?: Date;
}

export interface ReceiptVerification {
  checks: Check[];
  /** The payload, present only once the signature verified. */
  claims?: ReceiptClaims;
  /** RFC 7638 thumbprint of the JWKS key that verified the signature. */
  kid?: string;
}

export const NO_TEE_DETAIL = 'no hardware evidence exists: this service is not running in a TEE';

/** Receipts dated further ahead than this are refused as clock trouble or forgery. */
const MAX_CLOCK_SKEW_S = 300;

function jwksCheck(imported: ImportedJwks): Check {
  const skipped = imported.skipped.map((s) => `key ${s.index}${s.kid === undefined ? '' : ` (kid ${s.kid})`}: ${s.reason}`);
  const note = skipped.length === 0 ? '' : `; skipped ${skipped.join('; ')}`;
  if (imported.keys.length === 0) return fail('receipt.jwks', `no P-256 ES256 signature key in the JWKS${note}`);
  return pass('receipt.jwks', `${imported.keys.length} acceptable P-256 key(s)${note}`);
}

function compare(name: string, what: string, actual: string, expected: string): Check {
  return actual === expected ? pass(name, `${what} is ${actual}, as expected`) : fail(name, `${what} is ${actual}; expected ${expected}`);
}

function bytesCheck(name: string, claim: string, claims: ReceiptClaims, bytes: Uint8Array): Check {
  if (claims.receipt_type !== 'message') {
    return fail(name, `a model receipt does not cover the ${claim.replace('_hash', '')} bytes; verify the message receipt`);
  }
  const actual = sha256Tagged(bytes);
  const claimed = claim === 'request_hash' ? claims.request_hash : claims.response_hash;
  return claimed === actual
    ? pass(name, `${claim} equals SHA-256 of the ${bytes.length} bytes given (${actual})`)
    : fail(name, `${claim} is ${claimed}; the ${bytes.length} bytes given hash to ${actual}`);
}

function issuedAtCheck(claims: ReceiptClaims, now: Date): Check {
  const issued = Date.parse(claims.issued_at);
  if (Number.isNaN(issued) || Math.floor(issued / 1000) !== claims.iat) {
    return fail('receipt.issued_at', `issued_at ${claims.issued_at} does not match iat ${claims.iat}`);
  }
  const ahead = claims.iat - Math.floor(now.getTime() / 1000);
  if (ahead > MAX_CLOCK_SKEW_S) return fail('receipt.issued_at', `issued_at ${claims.issued_at} is ${ahead} s in the future`);
  return pass('receipt.issued_at', `issued ${claims.issued_at}`);
}

/**
 * The receipt was signed for the path the request was made on. A receipt from before the `endpoint` claim (schema 1.2.0) names
 * none: then only OpenAI's endpoints were served, so it can stand for one of those, never for the Messages API.
 */
function endpointCheck(claims: ReceiptClaims, path: string): Check {
  const bare = path.split('?')[0]!.replace(/\/+$/, '');
  if (claims.endpoint !== undefined) return compare('receipt.endpoint', 'endpoint', claims.endpoint, bare);
  return ENDPOINTS_BEFORE_ENDPOINT_CLAIM.includes(bare)
    ? pass(
        'receipt.endpoint',
        `the receipt names no endpoint (schema ${claims.schema_version}, before 1.2.0, when only OpenAI endpoints such as ${bare} were served)`,
      )
    : fail('receipt.endpoint', `the receipt names no endpoint (schema ${claims.schema_version}), so it was signed for an OpenAI endpoint, not ${bare}`);
}

function claimChecks(claims: ReceiptClaims, opts: VerifyReceiptOptions): Check[] {
  const expected = opts.expected ?? {};
  const checks: Check[] = [];
  checks.push(
    /^1\.\d+\.\d+$/.test(claims.schema_version)
      ? pass('receipt.schema_version', `schema_version ${claims.schema_version} (major version 1 understood)`)
      : fail('receipt.schema_version', `schema_version ${claims.schema_version} is not a 1.x.y this verifier understands`),
  );
  checks.push(
    expected.receiptType === undefined
      ? pass('receipt.receipt_type', `a ${claims.receipt_type} receipt (id ${claims.receipt_id})`)
      : compare('receipt.receipt_type', 'receipt_type', claims.receipt_type, expected.receiptType),
  );
  const nonce = expected.nonce ?? '';
  checks.push(
    claims.nonce === nonce
      ? pass('receipt.nonce', nonce === '' ? 'nonce is "", as no nonce was sent' : `nonce is the one sent (${JSON.stringify(nonce)})`)
      : fail('receipt.nonce', `nonce is ${JSON.stringify(claims.nonce)}; expected ${JSON.stringify(nonce)}`),
  );
  const waivers = opts.waive ?? {};
  /** A required expectation that is missing: waived with the caller's reason, else a failure that says what to give. */
  const missing = (name: string, key: RequiredExpectation, what: string): Check =>
    waivers[key] !== undefined
      ? waive(fail(name, `not checked: no expected ${what} was given (expected.${key})`), waivers[key])
      : fail(name, `not checked: no expected ${what} was given (expected.${key}), nor waived`);
  checks.push(
    expected.measurement !== undefined
      ? compare('receipt.measurement', 'enclave_measurement', claims.enclave_measurement, expected.measurement.toLowerCase())
      : missing('receipt.measurement', 'measurement', 'launch measurement'),
  );
  checks.push(
    expected.policyHash !== undefined
      ? compare('receipt.policy_hash', 'policy_hash', claims.policy_hash, expected.policyHash)
      : missing('receipt.policy_hash', 'policyHash', 'policy hash'),
  );
  if (expected.endpoint !== undefined) checks.push(endpointCheck(claims, expected.endpoint));
  if (expected.modelId !== undefined) checks.push(compare('receipt.model', 'selected_model.model_id', claims.selected_model.model_id, expected.modelId));
  if (expected.completionId !== undefined) {
    checks.push(compare('receipt.completion_id', 'completion_id', claims.completion_id ?? '(absent)', expected.completionId));
  }
  if (expected.requestBytes !== undefined) checks.push(bytesCheck('receipt.request_hash', 'request_hash', claims, expected.requestBytes));
  else if (claims.receipt_type === 'message') checks.push(missing('receipt.request_hash', 'requestBytes', 'request body'));
  if (expected.responseBytes !== undefined) checks.push(bytesCheck('receipt.response_hash', 'response_hash', claims, expected.responseBytes));
  else if (claims.receipt_type === 'message') checks.push(missing('receipt.response_hash', 'responseBytes', 'response body'));
  if (expected.attestationHash !== undefined && claims.tee !== 'none') {
    checks.push(compare('receipt.attestation_hash', 'attestation_hash', claims.attestation_hash ?? '(absent)', expected.attestationHash));
  }
  checks.push(issuedAtCheck(claims, opts.now ?? new Date()));
  if (claims.tee === 'none') {
    checks.push(
      opts.allowNoTee === true
        ? waive(fail('receipt.tee', `tee is "none": ${NO_TEE_DETAIL}`), 'no-TEE receipts allowed (development)')
        : fail('receipt.tee', `tee is "none": ${NO_TEE_DETAIL}`),
    );
  } else {
    checks.push(pass('receipt.tee', `tee is "${claims.tee}"; the hardware evidence is checked separately`));
  }
  return checks;
}

/**
 * Verifies a receipt (docs/receipts.md): the ES256 signature against every acceptable key of `jwks`, then
 * each claim against what the client knows. Never throws on bad input: every problem is a failing
 * Check. The receipt is good only when every check passed.
 */
export async function verifyReceipt(jws: string, opts: VerifyReceiptOptions): Promise<ReceiptVerification> {
  const checks: Check[] = [];
  let imported: ImportedJwks;
  try {
    imported = await importJwks(opts.jwks);
  } catch (err) {
    checks.push(fail('receipt.jwks', describeError(err)));
    return { checks };
  }
  checks.push(jwksCheck(imported));
  if (imported.keys.length === 0) return { checks };

  let verified: VerifiedJws;
  try {
    verified = verifyCompactJws(jws.trim(), imported.keys);
  } catch (err) {
    checks.push(fail('receipt.signature', describeError(err)));
    return { checks };
  }
  const { key } = verified;
  checks.push(pass('receipt.signature', `ES256 signature verifies under key ${key.thumbprint} (JWKS index ${key.index})`));

  let payload: unknown;
  try {
    payload = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(verified.payload));
  } catch {
    checks.push(fail('receipt.claims', 'the payload is not UTF-8 JSON'));
    return { checks, kid: key.thumbprint };
  }
  const problems = receiptShapeProblems(payload);
  if (problems.length > 0) {
    checks.push(fail('receipt.claims', problems.join('; ')));
    return { checks, kid: key.thumbprint };
  }
  const claims = payload as ReceiptClaims;
  checks.push(pass('receipt.claims', `every claim of a ${claims.receipt_type} receipt is present and well-formed`));
  checks.push(...claimChecks(claims, opts));
  return { checks, claims, kid: key.thumbprint };
}
