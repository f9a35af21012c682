import { START_NONCE, type GpuEvidence, type TransparencyLogBinding } from '../protocol/attestation.ts';
import { verifyAttestationDocument, type TrustRoots, type VerifyAttestationOptions } from './attestation.ts';
import { evidenceBytes, field, sameJson } from './binding.ts';
import { fail, isNotPinned, pass, verdictOf, waive, type Check, type Verdict } from './check.ts';
import { canonicalPolicyHash, sha256Tagged } from './digest.ts';
import type { CollateralBundle } from './evidence/collateral/bundle.ts';
import type { EventListing } from './evidence/event-log/measured-event.ts';
import { readOcspBundle, verifyGpuEvidence, type GpuReportSummary, type GpuTrustRoots } from './gpu/index.ts';
import { hpkeBindingCheck } from './hpke-key.ts';
import { ohttpKeyCheck, type ServedOhttpKeys } from './ohttp-key.ts';
import type { ReferenceValues } from './reference/reference-values.ts';
import { signedNonceCheck } from './signed-nonce.ts';
import { tlsBindingCheck } from './tls-key.ts';
import { expectedReportData, readBinding } from './binding.ts';
import { verifyExchange, type ExchangeVerification, type ReceiptContext, type ServiceExchange } from './exchange.ts';
import type { ReceiptClaims } from './claims.ts';
import { launchValuesNotCompared } from './reference/reference-checks.ts';
import { reportedManifestCheck } from './runtime-events.ts';
import { attestationDocumentShapeProblem } from './document-shape.ts';

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
  /** GET /v1/verify/policy; undefined when the caller has none (a receipt checked offline without --policy). */
  policy: unknown;
  /** GET /v1/verify/attestation without a nonce: the start evidence receipts name by `attestation_hash`. */
  startAttestation?: unknown;
  /** GET /.well-known/hpke-keys as served, or why it could not be read; absent when the binding names no HPKE key. */
  servedHpkeKeyConfig?: Uint8Array | Error;
  /** GET /.well-known/ohttp-gateway as served (docs/ohttp.md), or why not; absent when it was not fetched (a document from a file). */
  servedOhttpKeys?: ServedOhttpKeys;
  /**
   * The connection: the URL used and the SHA-256 of every TLS key it presented (none for plain HTTP), or
   * `'not visible'` where the caller cannot see them (a browser). Absent for a document read from a file.
   */
  connection?: { url: URL; presentedTlsKeys: readonly string[] | 'not visible' };
  /** The text of each NVIDIA RIM the reference values name (`reference.gpu.rims`), read by the caller. */
  rims?: readonly string[];
  /** The recorded OCSP responses the reference values name (`reference.gpu.ocsp`), read by the caller. */
  ocsp?: ReadonlyArray<{ label: string; der: Uint8Array }>;
  /**
   * The auditor's collateral bundle (`sigil collateral fetch`, docs/auditing.md section 3): Intel's for TDX evidence,
   * AMD's CRL for SEV-SNP evidence (checked as snp.crl instead of the certificate table's), NVIDIA's RIMs and OCSP
   * answers for GPU evidence (added to those the reference values name).
   */
  collateral?: CollateralBundle;
  /** Requests made to the service and their answers, with the receipts they carried: each is checked against the verified service. */
  exchanges?: readonly ServiceExchange[];
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
  /** Accept a document read from a file: no connection was made now, so no TLS key or served HPKE key can be compared. */
  noConnection?: string;
}

export interface ServiceExpectations {
  /** The 32 random bytes sent as ?nonce= (the all-zero START_NONCE for a saved start document). */
  nonce: Uint8Array;
  /** The launch measurement the caller expects (lowercase hex), e.g. from a reproducible build. */
  measurement?: string;
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
  /**
   * The Oblivious HTTP gateway (docs/ohttp.md): its key is the attested one, is not, the service serves none, or it
   * was not fetched (a document from a file).
   */
  ohttpGateway: 'attested' | 'not attested' | 'not offered' | 'not checked';
  jwks: { keys: unknown[] };
  policyHash: string;
  /** `"sha256:" + hex` of the start evidence, which receipts name; undefined without hardware. */
  attestationHash: string | undefined;
  gpus: GpuReportSummary[];
  /** The policy document served: the models a receipt may name. */
  policy: unknown;
  /** The transparency log the attestation binds (origin and checkpoint key, docs/log.md); null for a service without a log. */
  transparencyLog: TransparencyLogBinding | null;
}

export interface ServiceVerification {
  checks: Check[];
  verdict: Verdict;
  facts: ServiceFacts;
  /** The verification of each of `evidence.exchanges`, in order (its checks are also in `checks`). */
  exchanges: ExchangeVerification[];
}

/** `attestation.tls_key` as the caller could see it: a document from a file has no connection, a browser cannot see TLS keys. */
function tlsCheck(connection: ServiceEvidence['connection'], attestedKey: string | null, waivers: Waivers): Check {
  if (connection === undefined) {
    const none = fail(
      'attestation.tls_key',
      'not checked: the document was read from a file, not fetched over a connection now, so no TLS key could be compared with the attested one',
    );
    return waivers.noConnection === undefined ? none : waive(none, waivers.noConnection);
  }
  const { url, presentedTlsKeys } = connection;
  if (presentedTlsKeys !== 'not visible' || url.protocol !== 'https:' || attestedKey === null)
    return tlsBindingCheck(url, presentedTlsKeys === 'not visible' ? [] : presentedTlsKeys, attestedKey);
  return fail(
    'attestation.tls_key',
    `not checked: this client cannot see which TLS key its connection used (a browser does not show it to a page), so nothing ties the connection to the attested key sha256:${attestedKey}`,
  );
}

/** `attestation.hpke_key`; a document from a file came with no served key to compare, so, like its TLS key, it is not checked. */
function hpkeCheck(evidence: ServiceEvidence, attestedHpke: string, waivers: Waivers): Check {
  if (evidence.connection !== undefined || evidence.servedHpkeKeyConfig !== undefined) return hpkeBindingCheck(evidence.servedHpkeKeyConfig, attestedHpke);
  const none = fail(
    'attestation.hpke_key',
    'not checked: the document was read from a file, not fetched from the service now, so no served HPKE key could be compared with the attested one',
  );
  return waivers.noConnection === undefined ? none : waive(none, waivers.noConnection);
}

/** What the facts say of the gateway, read off `attestation.ohttp_key` and what was served. */
function ohttpGatewayFact(served: ServedOhttpKeys | undefined, check: Check | undefined): ServiceFacts['ohttpGateway'] {
  if (served === undefined) return 'not checked';
  if (served === 'not served') return 'not offered';
  return check?.ok === true ? 'attested' : 'not attested';
}

/** `attestation.tls_key`, with the only two ways around it: sealed bodies over HTTPS, or a waived development service. */
function channelCheck(evidence: ServiceEvidence, tee: unknown, attestedKey: string | null, hpke: Check | undefined, waivers: Waivers): Check {
  const tls = tlsCheck(evidence.connection, attestedKey, waivers);
  if (tls.ok || evidence.connection === undefined) return tls;
  if (evidence.connection.url.protocol === 'http:') {
    return tee === 'none' && waivers.noHardwareEnclave !== undefined ? waive(tls, waivers.noHardwareEnclave) : tls;
  }
  if (hpke?.ok === true) {
    return waive(
      tls,
      'every request body is sealed to the attested HPKE key and every sealed answer is opened with it; answers to unsealed requests (GET /v1/models) are authenticated only by TLS to whoever ends it',
    );
  }
  return tls;
}

const toHex = (bytes: Uint8Array): string => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');

/**
 * What a document without hardware evidence (tee "none") can still show: it answers our nonce, and its
 * report_data is the labelled hash of that nonce and its binding. Nothing vouches for either, so they only
 * catch a replayed or garbled document.
 */
function developmentDocumentChecks(doc: unknown, nonce: Uint8Array, jwks: { keys: unknown[] }, measurement: string | undefined): Check[] {
  const nonceHex = toHex(nonce);
  const docNonce = field(doc, 'nonce');
  const start = /^0+$/.test(nonceHex);
  const checks = [
    docNonce === nonceHex
      ? pass('attestation.nonce', start ? 'the document is the start evidence (all-zero nonce): not fresh' : `the document answers our fresh nonce ${nonceHex}`)
      : fail('attestation.nonce', `the document answers nonce ${JSON.stringify(docNonce)}; we sent ${nonceHex}: it may be a recording`),
  ];
  const binding = readBinding(doc);
  if (typeof binding === 'string') return [...checks, fail('attestation.document', binding)];
  const expected = expectedReportData(nonce, binding);
  const reportData = field(doc, 'report_data');
  checks.push(
    expected !== undefined && typeof reportData === 'string' && reportData.toLowerCase() === toHex(expected)
      ? pass('attestation.report_data', 'report_data is the labelled hash of our nonce and the binding (no hardware vouches for it)')
      : fail(
          'attestation.report_data',
          `report_data ${JSON.stringify(reportData)} is not the labelled hash of our nonce and the binding${expected === undefined ? '' : ` (${toHex(expected)})`}`,
        ),
  );
  checks.push(
    sameJson(binding.jwks, jwks)
      ? pass('attestation.jwks', 'the document names the JWKS the receipts verify against (no hardware vouches for it)')
      : fail('attestation.jwks', 'the document names a different JWKS from the one the receipts verify against'),
  );
  if (measurement !== undefined) {
    const measured = field(doc, 'measurement');
    checks.push(
      measured === measurement
        ? pass('attestation.measurement', `the document's measurement is the expected ${measurement} (no hardware measured it)`)
        : fail('attestation.measurement', `the document's measurement is ${String(measured)}; expected ${measurement}`),
    );
  }
  return checks;
}

function policyCheck(policy: unknown, bound: unknown): Check {
  if (policy === undefined) return fail('attestation.policy', 'not checked: no policy document was given, so nothing says which policy the enclave binds');
  const policyHash = canonicalPolicyHash(policy);
  return policyHash === bound
    ? pass('attestation.policy', `the policy served is the one the enclave binds (${policyHash})`)
    : fail('attestation.policy', `the policy served hashes to ${policyHash}, the enclave binds ${String(bound)}`);
}

function gpuChecks(doc: unknown, evidence: ServiceEvidence, expect: ServiceExpectations, at: Date): { checks: Check[]; gpus: GpuReportSummary[] } {
  const entries = field(doc, 'gpu_evidence');
  if (!Array.isArray(entries))
    return { checks: [fail('gpu.evidence', 'the attestation document has no gpu_evidence list, so nothing says which GPUs it covers')], gpus: [] };
  const bound = field(field(doc, 'binding'), 'gpu_evidence_sha256');
  const options: Parameters<typeof verifyGpuEvidence>[1] = { nonce: expect.nonce, at };
  if (entries.length > 0 || !Array.isArray(bound) || bound.length > 0) options.boundSha256 = Array.isArray(bound) ? bound.map(String) : [];
  const rimCount = expect.reference?.gpu?.rims?.length ?? 0;
  const bundle = evidence.collateral?.nvidia;
  const rims = [...(evidence.rims ?? []), ...(bundle?.rims ?? [])];
  if (rimCount > 0 || rims.length > 0) options.rims = rims;
  if (expect.gpuRoots !== undefined) options.roots = expect.gpuRoots;
  // A file the reference names but the caller could not read leaves its certificates uncovered: they fail, unless waived.
  if (expect.reference?.gpu?.ocsp !== undefined || bundle !== undefined) options.ocsp = readOcspBundle([...(evidence.ocsp ?? []), ...(bundle?.ocsp ?? [])]);
  if (expect.reference?.gpu?.ocsp_allow_missing !== undefined) options.ocspAllowMissing = expect.reference.gpu.ocsp_allow_missing;
  const result = verifyGpuEvidence(entries as GpuEvidence[], options);
  const unread =
    rimCount > (evidence.rims?.length ?? 0)
      ? [
          fail(
            'gpu.rims',
            `the reference values name ${rimCount} RIM(s) but only ${evidence.rims?.length ?? 0} could be read, so the GPU measurements cannot all be compared`,
          ),
        ]
      : [];
  return { checks: [...unread, ...result.checks], gpus: result.gpus };
}

/** `binding.transparency_log` when it has the shape docs/log.md gives it. */
function boundLog(binding: unknown): TransparencyLogBinding | null {
  const log = field(binding, 'transparency_log');
  const origin = field(log, 'origin');
  const vkey = field(log, 'vkey');
  return typeof origin === 'string' && typeof vkey === 'string' ? { origin, vkey } : null;
}

/** A document refused for its shape before anything in it was believed: one failed check, and facts that vouch for nothing. */
function refusedDocument(problem: string, evidence: ServiceEvidence): ServiceVerification {
  const checks = [fail('attestation.document', problem)];
  const facts: ServiceFacts = {
    tee: 'none',
    measurement: '',
    tlsSpkiSha256: null,
    hpkeKeyConfig: null,
    ohttpGateway: 'not checked',
    jwks: evidence.jwks,
    policyHash: '',
    attestationHash: undefined,
    gpus: [],
    policy: evidence.policy,
    transparencyLog: null,
  };
  return { checks, verdict: verdictOf(checks), facts, exchanges: [] };
}

/**
 * The one verification of a Sigil service (docs/auditing.md, "What a verdict means"): the CLI, the attested
 * client and the trust page fetch in their own way, call this, and render its checks. Pure: no I/O.
 */
export async function verifyService(evidence: ServiceEvidence, expect: ServiceExpectations): Promise<ServiceVerification> {
  const doc = evidence.attestation;
  const shape = attestationDocumentShapeProblem(doc) ?? attestationDocumentShapeProblem(evidence.startAttestation);
  if (shape !== undefined) return refusedDocument(shape, evidence);
  const waivers = expect.waive ?? {};
  const now = expect.now ?? new Date();
  const tee = field(doc, 'tee');
  const binding = field(doc, 'binding');
  const attestedKey = field(binding, 'tls_spki_sha256');
  const attestedHpke = field(binding, 'hpke_key_config');
  const expectedMeasurement = expect.measurement?.toLowerCase();
  const checks: Check[] = [];
  // With a signed nonce the document is the start evidence, made for the all-zero nonce; the signature answers ours.
  const documentNonce = evidence.signedNonce === undefined ? expect.nonce : START_NONCE;

  const hpke = typeof attestedHpke === 'string' ? hpkeCheck(evidence, attestedHpke, waivers) : undefined;
  const channel = channelCheck(evidence, tee, typeof attestedKey === 'string' ? attestedKey : null, hpke, waivers);
  checks.push(channel);
  if (hpke !== undefined) checks.push(hpke);
  const ohttp =
    evidence.servedOhttpKeys === undefined ? undefined : ohttpKeyCheck(evidence.servedOhttpKeys, typeof attestedHpke === 'string' ? attestedHpke : null);
  if (ohttp !== undefined) checks.push(ohttp);

  // With a signed nonce the document is itself the start evidence receipts name by attestation_hash.
  const startDocument = evidence.signedNonce === undefined ? evidence.startAttestation : doc;
  const start = tee === 'none' || startDocument === undefined ? undefined : evidenceBytes(startDocument);
  const attestationHash = start === undefined ? undefined : sha256Tagged(start);
  const documentMeasurement = field(doc, 'measurement');
  const context: ReceiptContext = { jwks: evidence.jwks, now };
  if (evidence.policy !== undefined) {
    context.policy = evidence.policy;
    context.policyHash = canonicalPolicyHash(evidence.policy);
  }
  const measurement = expectedMeasurement ?? (typeof documentMeasurement === 'string' ? documentMeasurement : undefined);
  if (measurement !== undefined) context.measurement = measurement;
  if (attestationHash !== undefined) context.attestationHash = attestationHash;
  if (waivers.noHardwareEnclave !== undefined) context.noHardwareEnclave = waivers.noHardwareEnclave;
  const exchanges = await Promise.all((evidence.exchanges ?? []).map((x) => verifyExchange(x, context)));
  const firstClaims: ReceiptClaims | undefined = exchanges.find((x) => x.claims !== undefined)?.claims;

  if (tee === 'none') {
    const noTee = fail(
      'attestation.tee',
      'tee is "none": no hardware evidence exists, this service is not running in a hardware enclave and nothing it says is vouched for',
    );
    checks.push(waivers.noHardwareEnclave === undefined ? noTee : waive(noTee, waivers.noHardwareEnclave));
    checks.push(...developmentDocumentChecks(doc, documentNonce, evidence.jwks, expectedMeasurement));
    const uncompared = launchValuesNotCompared(expect.reference);
    if (uncompared !== undefined) checks.push(waivers.noHardwareEnclave === undefined ? uncompared : waive(uncompared, waivers.noHardwareEnclave));
    // The manifest the process reports: shown in words that say no hardware vouches for it; unpinned, it is part of the no-TEE waiver.
    const manifest = reportedManifestCheck(binding, expect.reference?.sigil?.manifest_sha384);
    checks.push(isNotPinned(manifest) && waivers.noHardwareEnclave !== undefined ? waive(manifest, waivers.noHardwareEnclave) : manifest);
  } else {
    const options: VerifyAttestationOptions = { jwks: evidence.jwks as { keys: object[] }, nonce: documentNonce, now };
    if (expectedMeasurement !== undefined) options.expectedMeasurement = expectedMeasurement;
    if (expect.roots !== undefined) options.roots = expect.roots;
    if (expect.reference !== undefined) options.reference = expect.reference;
    if (evidence.collateral !== undefined) options.intelCollateral = evidence.collateral.intel;
    if (evidence.collateral?.amd.crl !== undefined) options.snpCollateral = { crl: evidence.collateral.amd.crl };
    if (expect.onEvents !== undefined) options.onEvents = expect.onEvents;
    if (firstClaims !== undefined) options.receipt = firstClaims;
    checks.push(...(await verifyAttestationDocument(doc, options)));
  }
  if (evidence.signedNonce !== undefined) checks.push(await signedNonceCheck(evidence.signedNonce, doc, expect.nonce));
  const gpu = gpuChecks(doc, evidence, { ...expect, nonce: documentNonce }, now);
  checks.push(...gpu.checks);
  checks.push(policyCheck(evidence.policy, field(binding, 'policy_hash')));
  for (const x of exchanges) checks.push(...x.checks);

  const final = waivers.unpinnedCode === undefined ? checks : checks.map((c) => (isNotPinned(c) ? waive(c, waivers.unpinnedCode!) : c));
  const served = evidence.servedHpkeKeyConfig;
  return {
    checks: final,
    verdict: verdictOf(final),
    facts: {
      tee: tee === 'sev-snp' || tee === 'tdx' ? tee : 'none',
      measurement: String(documentMeasurement),
      tlsSpkiSha256: channel.ok && typeof attestedKey === 'string' ? attestedKey : null,
      hpkeKeyConfig: hpke?.ok === true && served instanceof Uint8Array ? served : null,
      ohttpGateway: ohttpGatewayFact(evidence.servedOhttpKeys, ohttp),
      jwks: evidence.jwks,
      policyHash: context.policyHash ?? '',
      attestationHash,
      gpus: gpu.gpus,
      policy: evidence.policy,
      transparencyLog: boundLog(binding),
    },
    exchanges,
  };
}
