import { createPublicKey, X509Certificate } from 'node:crypto';
import { bundleFromJSON, isBundleWithDsseEnvelope, type Bundle, type BundleWithDsseEnvelope } from '@sigstore/bundle';
import { PublicKeyDetails, TrustedRoot } from '@sigstore/protobuf-specs';
import { toSignedEntity, toTrustMaterial, VerificationError, Verifier, type Signer, type TrustMaterial } from '@sigstore/verify';
import { fail, isWaived, notPinned, pass, verdictOf, waive, type Check } from '../check.ts';
import type { ReferenceValues, ReleaseReferenceValues } from '../reference/reference-values.ts';
import { IN_TOTO_PAYLOAD_TYPE, parseReleaseStatement, ReleaseManifestError, type ReleaseStatement } from './manifest.ts';
import { ReleaseError } from './errors.ts';
import { referenceValuesFromRelease } from './reference-from-release.ts';
import { compareReleaseVersions } from './release-version.ts';
import { identityMatches, publicGoodTrustedRoot, publicKeyHint, type ReleaseTrust } from './trust.ts';

export interface ReleaseVerification {
  /** True when every check passed or was waived (`verdictOf` is verified or verified-with-waivers): none failed, none is NOT PINNED. */
  ok: boolean;
  /** Only when ok: the manifest's values as the verifier's reference values. */
  referenceValues: ReferenceValues | undefined;
  /** Only when ok: the verified statement. */
  statement: ReleaseStatement | undefined;
  checks: Check[];
}

/** The steps @sigstore/verify runs, in its order, and the check each becomes. */
type CryptoStep = 'release.signer' | 'release.tlog' | 'release.signature';
const CRYPTO_STEPS: CryptoStep[] = ['release.signer', 'release.tlog', 'release.signature'];

function stepOf(err: unknown): CryptoStep {
  if (err instanceof VerificationError) {
    if (err.code.startsWith('TLOG_')) return 'release.tlog';
    if (err.code === 'SIGNATURE_ERROR') return 'release.signature';
  }
  return 'release.signer';
}

function notChecked(name: string, because: string): Check {
  return fail(name, `not checked: ${because} failed first, so nothing this step would vouch for can be trusted`);
}

function emptyRoot(): TrustedRoot {
  return TrustedRoot.fromJSON({
    mediaType: 'application/vnd.dev.sigstore.trustedroot+json;version=0.1',
    tlogs: [],
    certificateAuthorities: [],
    ctlogs: [],
    timestampAuthorities: [],
  });
}

function trustMaterial(trust: ReleaseTrust): TrustMaterial {
  if (trust.kind === 'sigstore') return toTrustMaterial(TrustedRoot.fromJSON(trust.trustedRoot ?? publicGoodTrustedRoot()));
  const hint = publicKeyHint(trust.publicKey);
  const der = createPublicKey(trust.publicKey).export({ type: 'spki', format: 'der' });
  return toTrustMaterial(emptyRoot(), { [hint]: { rawBytes: der, keyDetails: PublicKeyDetails.PKIX_ECDSA_P256_SHA_256 } });
}

function readBundle(bytes: Uint8Array): BundleWithDsseEnvelope {
  const json = JSON.parse(Buffer.from(bytes).toString('utf8')) as unknown;
  const bundle: Bundle = bundleFromJSON(json);
  if (!isBundleWithDsseEnvelope(bundle))
    throw new ReleaseError('ERR_RELEASE_BUNDLE', 'it holds a bare message signature, not a DSSE envelope around an in-toto statement');
  return bundle;
}

/** Which kind of signer the bundle names must match the trust: a pinned key never accepts a certificate, and the reverse. */
function keyKindProblem(bundle: BundleWithDsseEnvelope, trust: ReleaseTrust): string | undefined {
  const material = bundle.verificationMaterial.content.$case;
  if (trust.kind === 'key' && material !== 'publicKey')
    return 'the manifest is signed with a Sigstore certificate, but the verifier pins a key (--key): give --identity and --issuer instead';
  if (trust.kind === 'sigstore' && material === 'publicKey')
    return 'the manifest is signed with a bare key, not a Sigstore certificate for the expected workflow: pin that key with --key if you trust its holder';
  return undefined;
}

function tlogIndexes(bundle: BundleWithDsseEnvelope): string {
  return bundle.verificationMaterial.tlogEntries.map((e) => e.logIndex).join(', ');
}

function signerPass(trust: ReleaseTrust): string {
  if (trust.kind === 'key') return `signed with the pinned key (SHA-256 of its public key ${publicKeyHint(trust.publicKey)})`;
  return 'the signing certificate was issued by the pinned Sigstore certificate authority (Fulcio), was valid when the manifest was signed (by a trusted timestamp) and is recorded in certificate transparency';
}

function cryptoChecks(bundle: BundleWithDsseEnvelope, trust: ReleaseTrust): { checks: Check[]; signer: Signer | undefined } {
  const problem = keyKindProblem(bundle, trust);
  if (problem !== undefined) {
    return {
      checks: [fail('release.signer', problem), notChecked('release.tlog', 'release.signer'), notChecked('release.signature', 'release.signer')],
      signer: undefined,
    };
  }
  const options =
    trust.kind === 'key' ? { tlogThreshold: 0, ctlogThreshold: 0, timestampThreshold: 0 } : { tlogThreshold: 1, ctlogThreshold: 1, timestampThreshold: 1 };
  let signer: Signer | undefined;
  let failedStep: CryptoStep | undefined;
  let reason = '';
  let timestampFailed = false;
  try {
    signer = new Verifier(trustMaterial(trust), options).verify(toSignedEntity(bundle));
  } catch (err) {
    failedStep = stepOf(err);
    reason = (err as Error).message;
    timestampFailed = err instanceof VerificationError && err.code === 'TIMESTAMP_ERROR';
  }
  const failedIndex = failedStep === undefined ? CRYPTO_STEPS.length : CRYPTO_STEPS.indexOf(failedStep);
  const checks: Check[] = [];
  const entries = bundle.verificationMaterial.tlogEntries;
  for (const [i, step] of CRYPTO_STEPS.entries()) {
    if (i > failedIndex) {
      checks.push(notChecked(step, failedStep!));
      continue;
    }
    if (i === failedIndex) {
      const what = {
        'release.signer': timestampFailed
          ? 'no timestamp from a pinned authority covers this signature, so nothing shows the short-lived signing certificate was valid when it was made'
          : 'the signer is not one the pinned trust root or key vouches for',
        'release.tlog': 'the transparency-log entry does not prove the signature was logged',
        'release.signature': 'the signature does not match the manifest: it was altered after signing, or signed by another key',
      }[step];
      checks.push(fail(step, `${what} (${reason})`));
      continue;
    }
    if (step === 'release.signer') checks.push(pass(step, signerPass(trust)));
    else if (step === 'release.signature')
      checks.push(pass(step, "the DSSE signature over the manifest verifies with the signer's key: the manifest is byte for byte what was signed"));
    else if (trust.kind === 'key') {
      // Pinning a key (--key) is the auditor's choice to trust its holder without a log: an explicit waiver, never a pass.
      const unlogged = notPinned(
        step,
        'a locally keyed manifest is not in a transparency log, so nobody can see whether its signer published other, conflicting manifests',
      );
      checks.push(waive(unlogged, "the signer's key is pinned (--key): the auditor trusts its holder without a transparency log"));
    } else if (entries.length === 0 || entries.some((e) => e.inclusionProof === undefined)) {
      checks.push(
        fail(
          step,
          "the bundle carries only the log's signed promise to include the entry, not an inclusion proof: nothing shows the entry is in the log that everyone sees",
        ),
      );
    } else {
      checks.push(
        pass(
          step,
          `the signature is in the pinned Sigstore transparency log (entry ${tlogIndexes(bundle)}): its inclusion proof leads to a checkpoint signed by the log's pinned key, so the release was signed in public`,
        ),
      );
    }
  }
  return { checks, signer: failedStep === undefined ? signer : undefined };
}

function identityCheck(trust: ReleaseTrust, signer: Signer | undefined, cryptoOk: boolean): Check {
  if (!cryptoOk || signer === undefined) return notChecked('release.identity', 'an earlier release check');
  if (trust.kind === 'key')
    return pass(
      'release.identity',
      `the signer holds the pinned key ${publicKeyHint(trust.publicKey)}: the release comes from whoever the auditor trusted with that key`,
    );
  const san = signer.identity?.subjectAlternativeName;
  const issuer = signer.identity?.extensions?.issuer;
  if (!identityMatches(trust.identity, san)) {
    return fail(
      'release.identity',
      `the manifest was signed by ${san ?? 'an unnamed identity'}, not by the expected ${trust.identity}: someone other than the release workflow signed it`,
    );
  }
  if (issuer !== trust.issuer) {
    return fail('release.identity', `the signer's identity was vouched for by ${issuer ?? 'no named issuer'}, not by the expected ${trust.issuer}`);
  }
  return pass('release.identity', `signed by ${san}, vouched for by ${issuer}: the signer the auditor expects`);
}

function statementCheck(bundle: BundleWithDsseEnvelope): { check: Check; statement: ReleaseStatement | undefined } {
  const envelope = bundle.content.dsseEnvelope;
  if (envelope.payloadType !== IN_TOTO_PAYLOAD_TYPE) {
    return {
      check: fail(
        'release.statement',
        `the signed payload is of type ${envelope.payloadType}, not an in-toto statement (${IN_TOTO_PAYLOAD_TYPE}): it is not a release manifest`,
      ),
      statement: undefined,
    };
  }
  try {
    const statement = parseReleaseStatement(envelope.payload);
    const p = statement.predicate;
    return {
      check: pass(
        'release.statement',
        `a Sigil release manifest for version ${p.version}: image root hash ${p.image.root_hash}, ${p.targets.length} platform/VM shape target(s)`,
      ),
      statement,
    };
  } catch (err) {
    if (!(err instanceof ReleaseManifestError)) throw err;
    return { check: fail('release.statement', `the signed statement is not a Sigil release manifest: ${err.message}`), statement: undefined };
  }
}

function expiryCheck(statement: ReleaseStatement | undefined, now: Date): Check {
  if (statement === undefined) return notChecked('release.expiry', 'release.statement');
  const expires = new Date(statement.predicate.expires);
  if (now.getTime() >= expires.getTime()) {
    return fail(
      'release.expiry',
      `the manifest expired at ${expires.toISOString()} (now ${now.toISOString()}): its values may describe firmware or code with known flaws; fetch the current release manifest`,
    );
  }
  return pass('release.expiry', `the manifest is valid until ${expires.toISOString()} (now ${now.toISOString()})`);
}

/** The longest validity a manifest may state when the auditor names none: the release workflow's own (image/release-statement.sh). */
export const DEFAULT_MAX_VALIDITY_DAYS = 30;
const DAY_MS = 86_400_000;

/** When the manifest was signed, as far as the verifier can tell: a Fulcio certificate lives ten minutes, so its start is the signing time. */
function signedAt(bundle: BundleWithDsseEnvelope, trust: ReleaseTrust): Date | undefined {
  if (trust.kind !== 'sigstore') return undefined;
  const content = bundle.verificationMaterial.content;
  const der =
    content.$case === 'certificate'
      ? content.certificate.rawBytes
      : content.$case === 'x509CertificateChain'
        ? content.x509CertificateChain.certificates[0]?.rawBytes
        : undefined;
  return der === undefined ? undefined : new Date(new X509Certificate(der).validFrom);
}

/** When a release bundle was signed, as `release.validity` counts it: keyless, its certificate's start; keyed, unknown (undefined). */
export function releaseSignedAt(bundleBytes: Uint8Array, trust: ReleaseTrust): Date | undefined {
  return signedAt(readBundle(bundleBytes), trust);
}

const days = (ms: number) => `${(ms / DAY_MS).toFixed(1).replace(/\.0$/, '')} days`;

function validityCheck(statement: ReleaseStatement | undefined, signed: Date | undefined, maxDays: number, now: Date): Check {
  if (statement === undefined) return notChecked('release.validity', 'release.statement');
  const expires = new Date(statement.predicate.expires);
  const from = signed ?? now;
  const since =
    signed === undefined
      ? `now (${now.toISOString()}; a keyed manifest carries no signing time the verifier can trust)`
      : `its signing (${signed.toISOString()}, when its signing certificate was issued)`;
  const window = expires.getTime() - from.getTime();
  const allowed = `${maxDays} days allowed (release.max_validity_days in your reference values; ${DEFAULT_MAX_VALIDITY_DAYS}, the release workflow's own, when not given)`;
  if (window > maxDays * DAY_MS) {
    return fail(
      'release.validity',
      `the manifest stays valid for ${days(window)} from ${since} until ${expires.toISOString()}, longer than the ${allowed}: a manifest that lives that long keeps its values acceptable long after a newer release replaces them`,
    );
  }
  return pass('release.validity', `the manifest stays valid for at most ${days(Math.max(window, 0))} from ${since}, within the ${allowed}`);
}

function versionCheck(statement: ReleaseStatement | undefined, minVersion: string): Check {
  if (statement === undefined) return notChecked('release.version', 'release.statement');
  const version = statement.predicate.version;
  const order = compareReleaseVersions(version, minVersion);
  if (order === undefined)
    return fail(
      'release.version',
      `the manifest's version ${JSON.stringify(version)} is not a semantic version, so it cannot be compared with ${minVersion}, the oldest release your reference values accept`,
    );
  if (order < 0)
    return fail(
      'release.version',
      `the manifest is for release ${version}, older than ${minVersion}, the oldest your reference values accept (release.min_version): an older release stays signed and unexpired for a while after a newer one fixes its flaws`,
    );
  return pass(
    'release.version',
    `the manifest is for release ${version}, not older than ${minVersion}, the oldest your reference values accept (release.min_version)`,
  );
}

/**
 * Verifies a release manifest offline: a Sigstore bundle holding a DSSE-signed in-toto statement. Checks, by
 * name: release.bundle, release.signer, release.tlog, release.signature, release.identity, release.statement,
 * release.expiry, release.validity (the validity window against `requires.max_validity_days`, default 30) and,
 * when `requires.min_version` is given, release.version. Only when all pass does the manifest become reference values.
 */
export function verifyRelease(bundleBytes: Uint8Array, trust: ReleaseTrust, now: Date, requires: ReleaseReferenceValues = {}): ReleaseVerification {
  const minVersion = requires.min_version;
  const maxDays = requires.max_validity_days ?? DEFAULT_MAX_VALIDITY_DAYS;
  let bundle: BundleWithDsseEnvelope;
  try {
    bundle = readBundle(bundleBytes);
  } catch (err) {
    const checks = [fail('release.bundle', `the file is not a Sigstore bundle around a signed statement: ${(err as Error).message}`)];
    const later = ['release.signer', 'release.tlog', 'release.signature', 'release.identity', 'release.statement', 'release.expiry', 'release.validity'];
    for (const name of [...later, ...(minVersion === undefined ? [] : ['release.version'])]) checks.push(notChecked(name, 'release.bundle'));
    return { ok: false, referenceValues: undefined, statement: undefined, checks };
  }
  const bundleCheck = pass('release.bundle', `a Sigstore bundle (${bundle.mediaType}) holding one DSSE envelope`);
  const crypto = cryptoChecks(bundle, trust);
  // A waived step (release.tlog under a pinned key) was given up by the auditor, not failed: later steps still run.
  const cryptoOk = crypto.checks.every((c) => c.ok || isWaived(c));
  const identity = identityCheck(trust, crypto.signer, cryptoOk);
  // An unauthenticated payload is not read: its fields would mean nothing.
  const { check: statementResult, statement } = identity.ok
    ? statementCheck(bundle)
    : { check: notChecked('release.statement', 'the signature or signer check'), statement: undefined };
  const checks = [
    bundleCheck,
    ...crypto.checks,
    identity,
    minVersion === undefined && statementResult.ok
      ? {
          ...statementResult,
          detail: `${statementResult.detail}; no minimum version is required (release.min_version in your reference values), so any unexpired release from this signer is accepted`,
        }
      : statementResult,
    expiryCheck(statement, now),
    validityCheck(statement, statement === undefined ? undefined : signedAt(bundle, trust), maxDays, now),
    ...(minVersion === undefined ? [] : [versionCheck(statement, minVersion)]),
  ];
  const ok = verdictOf(checks).outcome !== 'not-verified';
  return {
    ok,
    referenceValues: ok && statement !== undefined ? referenceValuesFromRelease(statement.predicate) : undefined,
    statement: ok ? statement : undefined,
    checks,
  };
}
