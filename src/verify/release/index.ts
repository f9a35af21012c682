/** Release manifests (docs/release.md): verify a signed, expiring statement of what a deployment must measure. */
export { verifyRelease } from './verify-release.ts';
export type { ReleaseVerification } from './verify-release.ts';
export { signReleaseWithKey } from './sign-with-key.ts';
export { identityMatches, publicGoodTrustedRoot, publicKeyHint } from './trust.ts';
export type { KeyReleaseTrust, ReleaseTrust, SigstoreReleaseTrust } from './trust.ts';
export { IN_TOTO_PAYLOAD_TYPE, IN_TOTO_STATEMENT_TYPE, parseReleaseStatement, RELEASE_PREDICATE_TYPE, ReleaseManifestError } from './manifest.ts';
export type { ReleaseFirmware, ReleasePlatform, ReleasePredicate, ReleaseStatement, ReleaseTarget } from './manifest.ts';
export { RELEASE_KEYS, referenceValuesFromRelease, withReleaseValues } from './reference-from-release.ts';
export { releaseReference } from './release-reference.ts';
export type { ReleaseReference } from './release-reference.ts';
