import { START_NONCE, type GpuEvidence } from '../protocol/attestation.ts';
import { verifyAttestationDocument, type TrustRoots, type VerifyAttestationOptions } from './attestation.ts';
import { evidenceBytes, field, sameJson } from './binding.ts';
import { fail, isNotPinned, pass, verdictOf, waive, type Check, type Verdict } from './check.ts';
import { canonicalPolicyHash, sha256Tagged } from './digest.ts';
import type { IntelCollateral } from './evidence/collateral/intel-collateral.ts';
import type { EventListing } from './evidence/event-log/measured-event.ts';
import { readOcspBundle, verifyGpuEvidence, type GpuReportSummary, type GpuTrustRoots } from './gpu/index.ts';
import { hpkeBindingCheck } from './hpke-binding.ts';
import type { ReferenceValues } from './reference/reference-values.ts';
import { signedNonceCheck } from './signed-nonce.ts';
import { tlsBindingCheck } from './tls-pin.ts';

/** What was fetched from the service, however it was fetched (Node, a browser, files). */
export interface ServiceEvidence {
  /**
   * GET /v1/verify/attestation?nonce=HEX, answered for `expect.nonce`; or, with `signedNonce`, the start
   * evidence GET /v1/verify/attestation?nonce=HEX&proof=signature sent with it.
   */
  attestation: unknown;
  /**
   * `signed_nonce` of GET /v1/verify/attestation?nonce=HEX&proof=signature: `expect.nonce` signed by the receipt
   * key the start evidence binds. Present, freshness rests on it (`attestation.signed_nonce`) instead of a
   * fresh hardware report (docs/attestation.md, "Freshness from a signed nonce").
   */
  signedNonce?: string;
  /** GET /v1/verify/jwks.json */
  jwks: { keys: unknown[] };
  /** GET /v1/verify/policy */
  policy: unknown;
  /** GET /v1/verify/attestation without a nonce: the start evidence receipts name by `attestation_hash`. */
  startAttestation?: unknown;
  /** GET /.well-known/hpke-keys as served, or why it could not be read; absent when the binding names no HPKE key. */
  servedHpkeKeyConfig?: Uint8Array | Error;
  /** The connection: the URL used and the SHA-256 of every TLS key it presented (none for plain HTTP, or a browser that cannot see them). */
  connection: { url: URL; presentedTlsKeys: readonly string[] };
  /** The text of each NVIDIA RIM the reference values name (`reference.gpu.rims`), read by the caller. */
  rims?: readonly string[];
  /** The recorded OCSP responses the reference values name (`reference.gpu.ocsp`), read by the caller. */
  ocsp?: ReadonlyArray<{ label: string; der: Uint8Array }>;
  /** Intel's collateral for TDX evidence. */
  intelCollateral?: IntelCollateral;
}

/**
 * What the caller gives up, each with the reason the report shows. Anything not waived is required:
 * a missing input fails or stays NOT PINNED, and the verdict is not-verified.
 */
export interface Waivers {
  /** Accept code nobody pinned: measured values with no reference value become waived instead of NOT PINNED. */
  unpinnedCode?: string;
  /** Accept a development service without hardware (tee "none"), over plain HTTP if it is reached so. */
  noHardwareEnclave?: string;
}

export interface ServiceExpectations {
  /** The 32 random bytes sent as ?nonce=. */
  nonce: Uint8Array;
  reference?: ReferenceValues;
  waive?: Waivers;
  roots?: TrustRoots;
  gpuRoots?: GpuTrustRoots;
  /** The time certificates must be valid at; now by default. */
  now?: Date;
  onEvents?: (events: EventListing[]) => void;
}

/** What a verified service vouches for: every later request and receipt is held to it. */
export interface ServiceFacts {
  tee: 'sev-snp' | 'tdx' | 'none';
  measurement: string;
  /** The attested TLS key when the connection presented it (TLS ends in the enclave); else null. */
  tlsSpkiSha256: string | null;
  /** The attested HPKE key config bodies are sealed to; null when none is offered or it did not verify. */
  hpkeKeyConfig: Uint8Array | null;
  jwks: { keys: unknown[] };
  policyHash: string;
  /** `"sha256:" + hex` of the start evidence, which receipts name; undefined without hardware. */
  attestationHash: string | undefined;
  gpus: GpuReportSummary[];
}

export interface ServiceVerification {
  checks: Check[];
  verdict: Verdict;
  facts: ServiceFacts;
}

/** `attestation.tls_key`, with the only two ways around it: sealed bodies over HTTPS, or a waived development service. */
function channelCheck(evidence: ServiceEvidence, tee: unknown, attestedKey: string | null, hpke: Check | undefined, waivers: Waivers): Check {
  const { url, presentedTlsKeys } = evidence.connection;
  const tls = tlsBindingCheck(url, presentedTlsKeys, attestedKey);
  if (tls.ok) return tls;
  if (url.protocol === 'http:') {
    return tee === 'none' && waivers.noHardwareEnclave !== undefined ? waive(tls, waivers.noHardwareEnclave) : tls;
  }
  if (hpke?.ok === true) {
    return waive(tls, 'every request body is sealed to the attested HPKE key and every sealed answer is opened with it; answers to unsealed requests (GET /v1/models) are authenticated only by TLS to whoever ends it');
  }
  return tls;
}

function policyCheck(policy: unknown, bound: unknown): Check {
  const policyHash = canonicalPolicyHash(policy);
  return policyHash === bound
    ? pass('attestation.policy', `the policy served is the one the enclave binds (${policyHash})`)
    : fail('attestation.policy', `the policy served hashes to ${policyHash}, the enclave binds ${String(bound)}`);
}

function gpuChecks(doc: unknown, evidence: ServiceEvidence, expect: ServiceExpectations, at: Date): { checks: Check[]; gpus: GpuReportSummary[] } {
  const entries = field(doc, 'gpu_evidence');
  if (!Array.isArray(entries)) return { checks: [fail('gpu.evidence', 'the attestation document has no gpu_evidence list, so nothing says which GPUs it covers')], gpus: [] };
  const bound = field(field(doc, 'binding'), 'gpu_evidence_sha256');
  const options: Parameters<typeof verifyGpuEvidence>[1] = { nonce: expect.nonce, at };
  if (entries.length > 0 || !Array.isArray(bound) || bound.length > 0) options.boundSha256 = Array.isArray(bound) ? bound.map(String) : [];
  const rimCount = expect.reference?.gpu?.rims?.length ?? 0;
  if (rimCount > 0 || (evidence.rims?.length ?? 0) > 0) options.rims = [...(evidence.rims ?? [])];
  if (expect.gpuRoots !== undefined) options.roots = expect.gpuRoots;
  // A file the reference names but the caller could not read leaves its certificates uncovered: they fail, unless waived.
  if (expect.reference?.gpu?.ocsp !== undefined) options.ocsp = readOcspBundle([...(evidence.ocsp ?? [])]);
  if (expect.reference?.gpu?.ocsp_allow_missing !== undefined) options.ocspAllowMissing = expect.reference.gpu.ocsp_allow_missing;
  const result = verifyGpuEvidence(entries as GpuEvidence[], options);
  const unread = rimCount > (evidence.rims?.length ?? 0) ? [fail('gpu.rims', `the reference values name ${rimCount} RIM(s) but only ${evidence.rims?.length ?? 0} could be read, so the GPU measurements cannot all be compared`)] : [];
  return { checks: [...unread, ...result.checks], gpus: result.gpus };
}

/**
 * The one verification of a Sigil service (docs/auditing.md, "What a verdict means"): the CLI, the attested
 * client and the trust page fetch in their own way, call this, and render its checks. Pure: no I/O.
 */
export async function verifyService(evidence: ServiceEvidence, expect: ServiceExpectations): Promise<ServiceVerification> {
  const doc = evidence.attestation;
  const waivers = expect.waive ?? {};
  const now = expect.now ?? new Date();
  const tee = field(doc, 'tee');
  const binding = field(doc, 'binding');
  const attestedKey = field(binding, 'tls_spki_sha256');
  const attestedHpke = field(binding, 'hpke_key_config');
  const checks: Check[] = [];
  // With a signed nonce the document is the start evidence, made for the all-zero nonce; the signature answers ours.
  const documentNonce = evidence.signedNonce === undefined ? expect.nonce : START_NONCE;

  const hpke = typeof attestedHpke === 'string' ? hpkeBindingCheck(evidence.servedHpkeKeyConfig, attestedHpke) : undefined;
  const channel = channelCheck(evidence, tee, typeof attestedKey === 'string' ? attestedKey : null, hpke, waivers);
  checks.push(channel);
  if (hpke !== undefined) checks.push(hpke);

  let attestationHash: string | undefined;
  if (tee === 'none') {
    const noTee = fail('attestation.tee', 'tee is "none": no hardware evidence exists, this service is not running in a hardware enclave and nothing it says is vouched for');
    checks.push(waivers.noHardwareEnclave === undefined ? noTee : waive(noTee, waivers.noHardwareEnclave));
    checks.push(
      sameJson(field(binding, 'jwks'), evidence.jwks)
        ? pass('attestation.jwks', 'the document names the JWKS the receipts verify against (no hardware vouches for it)')
        : fail('attestation.jwks', 'the document names a different JWKS from the one the receipts verify against'),
    );
  } else {
    const options: VerifyAttestationOptions = { jwks: evidence.jwks as { keys: object[] }, nonce: documentNonce, now };
    if (expect.roots !== undefined) options.roots = expect.roots;
    if (expect.reference !== undefined) options.reference = expect.reference;
    if (evidence.intelCollateral !== undefined) options.intelCollateral = evidence.intelCollateral;
    if (expect.onEvents !== undefined) options.onEvents = expect.onEvents;
    checks.push(...(await verifyAttestationDocument(doc, options)));
    const startDocument = evidence.signedNonce === undefined ? evidence.startAttestation : doc;
    const start = startDocument === undefined ? undefined : evidenceBytes(startDocument);
    attestationHash = start === undefined ? undefined : sha256Tagged(start);
  }
  if (evidence.signedNonce !== undefined) checks.push(await signedNonceCheck(evidence.signedNonce, doc, expect.nonce));
  const gpu = gpuChecks(doc, evidence, { ...expect, nonce: documentNonce }, now);
  checks.push(...gpu.checks);
  const gpus = gpu.gpus;
  checks.push(policyCheck(evidence.policy, field(binding, 'policy_hash')));

  const final = waivers.unpinnedCode === undefined ? checks : checks.map((c) => (isNotPinned(c) ? waive(c, waivers.unpinnedCode!) : c));
  const served = evidence.servedHpkeKeyConfig;
  return {
    checks: final,
    verdict: verdictOf(final),
    facts: {
      tee: tee as ServiceFacts['tee'],
      measurement: String(field(doc, 'measurement')),
      tlsSpkiSha256: channel.ok && typeof attestedKey === 'string' ? attestedKey : null,
      hpkeKeyConfig: hpke?.ok === true && served instanceof Uint8Array ? served : null,
      jwks: evidence.jwks,
      policyHash: canonicalPolicyHash(evidence.policy),
      attestationHash,
      gpus,
    },
  };
}
