import type { Check } from '../check.ts';
import type { ReferenceValues } from '../reference/reference-values.ts';
import { ReleaseError } from './errors.ts';
import { withReleaseValues } from './reference-from-release.ts';
import type { ReleaseTrust } from './trust.ts';
import { verifyRelease } from './verify-release.ts';

/** A release manifest verified now, and the reference values a service is then verified against. */
export interface ReleaseReference {
  /** The release.* checks, reported with the service's: any failed one fails the verdict. */
  checks: Check[];
  /** The release's values with `own` added; `own` alone when the release did not verify; undefined when neither gives any. */
  values: ReferenceValues | undefined;
}

/**
 * Verifies a release manifest offline and adds `own`, the reference values a release cannot state (machine
 * allow-lists, TCB floors, policy), to its values (docs/release.md#verifying). `sigil verify --release`,
 * `sigil verify-evidence --release` and the attested client's `release` all take their reference values from here.
 * Throws ReleaseError ERR_RELEASE_TRUST_UNUSABLE, with the cause's message, when the signer's key or trust root
 * cannot be used at all, and ReferenceValuesError when `own` pins a key the release states.
 */
export function verifyReleaseReference(bundle: Uint8Array, trust: ReleaseTrust, own: ReferenceValues | undefined, now: Date): ReleaseReference {
  let release;
  try {
    release = verifyRelease(bundle, trust, now, own?.release);
  } catch (err) {
    throw new ReleaseError('ERR_RELEASE_TRUST_UNUSABLE', (err as Error).message, { cause: err });
  }
  return { checks: release.checks, values: own === undefined ? release.referenceValues : withReleaseValues(own, release.referenceValues) };
}
