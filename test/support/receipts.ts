import { expect } from 'vitest';
import { canonicalPolicyHash, verifyReceipt, type ReceiptExpectations, type ReceiptVerification } from '../../src/verify/index.ts';

/** The launch digest a development Sigil (no TEE) reports: all zeros. */
export const NO_TEE_MEASUREMENT = '0'.repeat(96);

/** What a client of the service at `url` fetches to verify its receipts: the JWKS and the policy document's hash. */
export async function receiptMaterial(url: string): Promise<{ jwks: { keys: unknown[] }; policyHash: string }> {
  const jwks = (await (await fetch(`${url}/v1/verify/jwks.json`)).json()) as { keys: unknown[] };
  const policyHash = canonicalPolicyHash(await (await fetch(`${url}/v1/verify/policy`)).json());
  return { jwks, policyHash };
}

/**
 * Verifies `jws` as a client of the development Sigil at `url` does (its JWKS and policy hash fetched from it, the
 * all-zero measurement, `allowNoTee`) against `expected`, and fails the test on any check that neither passed nor
 * was waived. Returns the verification for the assertions a test adds.
 */
export async function expectVerifiedReceipt(
  url: string,
  jws: string,
  expected: Omit<ReceiptExpectations, 'measurement' | 'policyHash'>,
): Promise<ReceiptVerification> {
  const { jwks, policyHash } = await receiptMaterial(url);
  const verification = await verifyReceipt(jws, { jwks, allowNoTee: true, expected: { measurement: NO_TEE_MEASUREMENT, policyHash, ...expected } });
  expect(verification.checks.filter((c) => !c.ok && c.waived === undefined)).toEqual([]);
  return verification;
}
