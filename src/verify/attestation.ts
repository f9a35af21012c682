import { fail, notPinned, pass } from './check.ts';
import type { Check } from './check.ts';
import { toHex } from './evidence/byte-reader.ts';
import { ATTESTATION_DOCUMENT_VERSION, splitSnpEvidence, type AttestationBinding } from '../protocol/attestation.ts';
import { canonicalJson } from '../protocol/jcs.ts';
import { expectedReportData, readBinding } from './binding.ts';
import { verifySnpEvidence, type SnpEvidenceCollateral } from './evidence/snp-verify.ts';
import { verifyTdxEvidence, verifyTdxEvidenceWithCollateral } from './evidence/tdx-verify.ts';
import type { IntelCollateral } from './evidence/collateral/intel-collateral.ts';
import { DEFAULT_TRUST_ROOTS, type TrustRoots } from './evidence/trust-roots.ts';
import { verifyTdxEventLog, type TdxEventLogInput } from './evidence/event-log/tdx-event-log.ts';
import type { EventListing } from './evidence/event-log/measured-event.ts';
import { keyOriginCheck } from './key-origin.ts';
import { attestationDocumentShapeProblem } from './document-shape.ts';
import { receiptEventCheck, reportedManifestCheck, runtimeEventChecks } from './runtime-events.ts';
import { launchValuesNotCompared, snpReferenceChecks, tdxReferenceChecks, type TdxMeasurements } from './reference/reference-checks.ts';
import type { ReferenceValues } from './reference/reference-values.ts';

export type { TrustRoots } from './evidence/trust-roots.ts';
export { DEFAULT_TRUST_ROOTS } from './evidence/trust-roots.ts';

export interface VerifyAttestationOptions {
  /** The JWKS the receipt verified against: the evidence must bind exactly this. */
  jwks: { keys: object[] };
  /**
   * The nonce the client sent to GET /v1/verify/attestation (START_NONCE for the start evidence). Absent,
   * `attestation.report_data` fails: nothing says the evidence is fresh or what it is bound to.
   */
  nonce?: Uint8Array;
  /** The measurement the caller expects (lowercase hex); absent and not pinned by `reference`, `attestation.measurement` is NOT PINNED. */
  expectedMeasurement?: string;
  /** Trusted AMD and Intel roots; the built-in ones unless a test brings its own. */
  roots?: TrustRoots;
  /** The time certificates must be valid at; now by default. */
  now?: Date;
  /** The auditor's reference values (docs/auditing.md); without them every measured value is reported as not pinned. */
  reference?: ReferenceValues;
  /** Intel's collateral for TDX evidence (TCB info, QE identity, CRLs), verified at `now`; absent: TCB status not checked. */
  intelCollateral?: IntelCollateral;
  /** AMD's collateral for SEV-SNP evidence: its CRL is used instead of the certificate table's (`snp.crl`). */
  snpCollateral?: SnpEvidenceCollateral;
  /** The receipt being checked, if any: tied to the runtime event in force when it was signed (`receipt.event`). */
  receipt?: { policy_hash: string; iat: number };
  /** Receives the replayed event log's events (TDX), for a report that lists them. */
  onEvents?: (events: EventListing[]) => void;
}

const HEX = /^(?:[0-9a-fA-F]{2})*$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

interface DocumentFields {
  tee: 'sev-snp' | 'tdx' | 'none';
  measurement: string;
  nonce: string;
  binding: AttestationBinding;
  evidence: Uint8Array | null;
  eventLog: TdxEventLogInput | string | null;
}

function base64Field(value: unknown, name: string): Uint8Array | undefined | string {
  if (value === null || value === undefined) return undefined;
  if (typeof value !== 'string' || !BASE64.test(value)) return `event_log.${name} is neither null nor base64`;
  return new Uint8Array(Buffer.from(value, 'base64'));
}

/** The document's `event_log` as replay input, or why it cannot be read. */
function readEventLog(value: unknown): TdxEventLogInput | string | null {
  if (value === null || value === undefined) return null;
  if (typeof value !== 'object' || Array.isArray(value)) return 'event_log is neither null nor an object';
  const e = value as Record<string, unknown>;
  const input: TdxEventLogInput = {};
  const table = base64Field(e.ccel_table, 'ccel_table');
  const data = base64Field(e.ccel_data, 'ccel_data');
  if (typeof table === 'string') return table;
  if (typeof data === 'string') return data;
  if (table !== undefined) input.ccelTable = table;
  if (data !== undefined) input.ccelData = data;
  const runtime = e.runtime_events ?? [];
  if (!Array.isArray(runtime)) return 'event_log.runtime_events is not an array';
  for (const [i, r] of runtime.entries()) {
    const ev = r as Record<string, unknown>;
    if (
      typeof ev !== 'object' ||
      ev === null ||
      typeof ev.imr !== 'number' ||
      typeof ev.event !== 'string' ||
      typeof ev.digest !== 'string' ||
      typeof ev.payload !== 'string'
    ) {
      return `event_log.runtime_events[${i}] is not {imr, event, digest, payload}`;
    }
  }
  input.runtimeEvents = runtime as TdxEventLogInput['runtimeEvents'] & object;
  return input;
}

function readDocument(doc: unknown): DocumentFields | string {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return 'the attestation document is not a JSON object';
  const d = doc as Record<string, unknown>;
  const shape = attestationDocumentShapeProblem(doc);
  if (shape !== undefined) return shape;
  if (d.version !== ATTESTATION_DOCUMENT_VERSION)
    return `the document's version is ${JSON.stringify(d.version)}; this verifier reads version ${ATTESTATION_DOCUMENT_VERSION}`;
  if (d.tee !== 'sev-snp' && d.tee !== 'tdx' && d.tee !== 'none') return `tee ${JSON.stringify(d.tee)} is not "sev-snp", "tdx" or "none"`;
  if (typeof d.measurement !== 'string' || !HEX.test(d.measurement)) return 'measurement is not a hex string';
  if (typeof d.nonce !== 'string' || !/^[0-9a-fA-F]{64}$/.test(d.nonce)) return 'nonce is not 32 bytes of hex';
  const binding = readBinding(doc);
  if (typeof binding === 'string') return binding;
  const evidence = d.evidence ?? null;
  if (evidence !== null && (typeof evidence !== 'string' || !BASE64.test(evidence))) return 'evidence is neither null nor base64';
  return {
    tee: d.tee,
    measurement: d.measurement,
    nonce: d.nonce,
    binding,
    evidence: evidence === null ? null : new Uint8Array(Buffer.from(evidence, 'base64')),
    eventLog: readEventLog(d.event_log),
  };
}

function reportDataCheck(actual: Uint8Array, expected: Uint8Array | undefined, nonceHex: string | undefined): Check {
  if (nonceHex === undefined) {
    return fail(
      'attestation.report_data',
      `the evidence's REPORT_DATA ${toHex(actual)} was compared with nothing: no nonce was given, so nothing says this evidence is fresh or which keys it binds`,
    );
  }
  const what = /^0+$/.test(nonceHex)
    ? 'the labelled hash of the binding and the all-zero nonce (the start evidence, not fresh)'
    : `the labelled hash of the binding and our nonce ${nonceHex}`;
  return expected !== undefined && Buffer.from(actual).equals(Buffer.from(expected))
    ? pass('attestation.report_data', `the evidence's REPORT_DATA equals ${what}: the enclave vouches for this binding`)
    : fail('attestation.report_data', `the evidence's REPORT_DATA ${toHex(actual)} is not ${what}${expected === undefined ? '' : ` = ${toHex(expected)}`}`);
}

function jwksCheck(binding: AttestationBinding, jwks: { keys: object[] }): Check {
  let same = false;
  try {
    same = canonicalJson(binding.jwks) === canonicalJson(jwks);
  } catch {
    same = false;
  }
  return same
    ? pass('attestation.jwks', 'the binding carries exactly the JWKS the receipts verify against')
    : fail('attestation.jwks', 'the binding carries a different JWKS from the one the receipts verify against');
}

function measurementCheck(actual: Uint8Array, field: string, documentMeasurement: string, expected: string | undefined, pinnedByReference: boolean): Check {
  const hex = toHex(actual);
  if (hex !== documentMeasurement.toLowerCase()) {
    return fail('attestation.measurement', `the evidence's ${field} ${hex} differs from the document's measurement ${documentMeasurement}`);
  }
  if (expected !== undefined && hex !== expected.toLowerCase()) {
    return fail('attestation.measurement', `the evidence's ${field} ${hex} differs from the expected measurement ${expected}`);
  }
  if (expected !== undefined) return pass('attestation.measurement', `${field} ${hex} equals the expected measurement`);
  if (pinnedByReference)
    return pass('attestation.measurement', `${field} ${hex} equals the document's measurement; the reference values below compare it with the audited code`);
  return notPinned(
    'attestation.measurement',
    `${field} ${hex} equals the document's measurement, but no expected measurement or reference value pins it: nothing says it is the right code`,
  );
}

/**
 * Verifies an attestation document (GET /v1/verify/attestation, docs/attestation.md) as a skeptical client: the
 * hardware evidence's signatures and certificate chain up to AMD's or Intel's root, its REPORT_DATA against the
 * labelled hash of our nonce and the binding (docs/attestation.md, "The report data"), the binding's JWKS against
 * the receipts', and its launch measurement against the document and the expected value. One named check per
 * fact; `verdictOf` says whether they add up to a verified service.
 */
export async function verifyAttestationDocument(doc: unknown, opts: VerifyAttestationOptions): Promise<Check[]> {
  const fields = readDocument(doc);
  if (typeof fields === 'string') return [fail('attestation.document', fields)];
  if (fields.tee === 'none') {
    const uncompared = launchValuesNotCompared(opts.reference);
    return [
      fail('attestation.tee', 'no hardware evidence: tee is none (development only)'),
      ...(uncompared === undefined ? [] : [uncompared]),
      reportedManifestCheck(fields.binding, opts.reference?.sigil?.manifest_sha384),
    ];
  }

  const roots = opts.roots ?? DEFAULT_TRUST_ROOTS;
  const now = opts.now ?? new Date();
  const expected = opts.nonce === undefined ? undefined : expectedReportData(opts.nonce, fields.binding);
  const nonceHex = opts.nonce === undefined ? undefined : toHex(opts.nonce);
  const bound = jwksCheck(fields.binding, opts.jwks);
  if (fields.evidence === null) return [fail('attestation.document', `tee is ${fields.tee} but the document carries no evidence`)];

  if (fields.tee === 'sev-snp') {
    const { report, certificates } = splitSnpEvidence(fields.evidence);
    const result = verifySnpEvidence(report, certificates, roots, now, opts.reference?.snp, opts.snpCollateral);
    if (result.report === undefined) return result.checks;
    return [
      ...result.checks,
      reportDataCheck(result.report.reportData, expected, nonceHex),
      bound,
      measurementCheck(
        result.report.measurement,
        'MEASUREMENT',
        fields.measurement,
        opts.expectedMeasurement,
        (opts.reference?.snp?.measurement?.length ?? 0) > 0,
      ),
      ...snpReferenceChecks({ measurement: toHex(result.report.measurement), host_data: toHex(result.report.hostData) }, opts.reference),
      ...sigilStateChecks(doc, fields.binding, opts),
    ];
  }

  const result =
    opts.intelCollateral === undefined
      ? verifyTdxEvidence(fields.evidence, roots, now, opts.reference?.tdx)
      : await verifyTdxEvidenceWithCollateral(fields.evidence, roots, now, opts.reference?.tdx, opts.intelCollateral);
  if (result.quote === undefined) return result.checks;
  return [
    ...result.checks,
    reportDataCheck(result.quote.body.reportData, expected, nonceHex),
    bound,
    measurementCheck(result.quote.body.mrTd, 'MRTD', fields.measurement, opts.expectedMeasurement, (opts.reference?.tdx?.mrtd?.length ?? 0) > 0),
    ...tdxReferenceChecks(tdxMeasurements(result.quote.body), opts.reference),
    ...eventLogChecks(fields.eventLog, result.quote.body.rtmr, opts.onEvents),
    ...sigilStateChecks(doc, fields.binding, opts),
  ];
}

/** What Sigil states about itself: where its keys came from, its runtime events, and the receipt's place among them. */
function sigilStateChecks(doc: unknown, binding: AttestationBinding, opts: VerifyAttestationOptions): Check[] {
  const { checks, events } = runtimeEventChecks(binding, (doc as { event_log?: unknown }).event_log ?? null, opts.reference?.sigil?.manifest_sha384);
  const out = [keyOriginCheck(binding.key_origin, opts.reference?.sigil?.accept_loaded_keys, (doc as { tee?: unknown }).tee as string | undefined), ...checks];
  if (opts.receipt !== undefined) out.push(receiptEventCheck(events, opts.receipt));
  return out;
}

export function tdxMeasurements(body: { mrTd: Uint8Array; rtmr: readonly Uint8Array[] }): TdxMeasurements {
  return { mrtd: toHex(body.mrTd), rtmr0: toHex(body.rtmr[0]!), rtmr1: toHex(body.rtmr[1]!), rtmr2: toHex(body.rtmr[2]!), rtmr3: toHex(body.rtmr[3]!) };
}

function eventLogChecks(log: DocumentFields['eventLog'], rtmrs: readonly Uint8Array[], onEvents: VerifyAttestationOptions['onEvents']): Check[] {
  if (typeof log === 'string') return [fail('eventlog.parse', log)];
  const result = verifyTdxEventLog(log ?? {}, rtmrs);
  onEvents?.(result.events);
  if (log === null)
    return result.checks.map((c) =>
      c.name === 'eventlog.replay' ? { ...c, detail: c.detail.replace('no event log given', 'the document carries no event log') } : c,
    );
  return result.checks;
}
