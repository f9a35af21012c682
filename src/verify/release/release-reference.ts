import type { Check } from '../check.ts';
import type { ReferenceValues } from '../reference/reference-values.ts';
import type { ReleaseTrust } from './trust.ts';
import { verifyRelease } from './verify-release.ts';

export interface ReleaseReference {
  /** The release checks, to print with the verifier's others; any failure makes the whole verdict NOT VERIFIED. */
  checks: Check[];
  /** Only when every release check passed: the manifest's values, compared with the evidence like a reference file. */
  referenceValues: ReferenceValues | undefined;
}

/**
 * A release manifest as the reference values of a service verification (docs/release.md). With a pinned key
 * (trust kind `key`) there is no transparency log: `verifyRelease` waives `release.tlog` with that reason
 * (listed, never PASS).
 */
export function releaseReference(bundle: Uint8Array, trust: ReleaseTrust, now: Date): ReleaseReference {
  const result = verifyRelease(bundle, trust, now);
  return { checks: result.checks, referenceValues: result.ok ? result.referenceValues : undefined };
}
