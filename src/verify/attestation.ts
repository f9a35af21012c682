import { fail, pass } from './check.ts';
import type { Check } from './check.ts';
import { toHex } from './evidence/byte-reader.ts';
import { expectedReportData } from './evidence/report-data.ts';
import { verifySnpEvidence } from './evidence/snp-verify.ts';
import { verifyTdxEvidence } from './evidence/tdx-verify.ts';
import { DEFAULT_TRUST_ROOTS, type TrustRoots } from './evidence/trust-roots.ts';

export type { TrustRoots } from './evidence/trust-roots.ts';
export { DEFAULT_TRUST_ROOTS } from './evidence/trust-roots.ts';

export interface VerifyAttestationOptions {
  /** The JWKS the receipt verified against: the evidence must bind exactly this. */
  jwks: { keys: object[] };
  /** The nonce the client sent to GET /v1/verify/attestation; absent to accept the document's own (e.g. "" for the start evidence). */
  nonce?: Uint8Array;
  /** The receipts' enclave_measurement (lowercase hex); absent to skip that comparison. */
  expectedMeasurement?: string;
  /** Trusted AMD and Intel roots; the built-in ones unless a test brings its own. */
  roots?: TrustRoots;
  /** The time certificates must be valid at; now by default. */
  now?: Date;
}

const HEX = /^(?:[0-9a-fA-F]{2})*$/;

interface DocumentFields {
  tee: 'sev-snp' | 'tdx' | 'none';
  measurement: string;
  nonce: string;
  evidence: Record<string, unknown> | null;
}

function readDocument(doc: unknown): DocumentFields | string {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return 'the attestation document is not a JSON object';
  const d = doc as Record<string, unknown>;
  if (d.tee !== 'sev-snp' && d.tee !== 'tdx' && d.tee !== 'none') return `tee ${JSON.stringify(d.tee)} is not "sev-snp", "tdx" or "none"`;
  if (typeof d.measurement !== 'string' || !HEX.test(d.measurement)) return 'measurement is not a hex string';
  const nonce = d.nonce ?? '';
  if (typeof nonce !== 'string' || !HEX.test(nonce)) return 'nonce is not a hex string';
  const evidence = d.evidence ?? null;
  if (evidence !== null && (typeof evidence !== 'object' || Array.isArray(evidence))) return 'evidence is neither null nor an object';
  return { tee: d.tee, measurement: d.measurement, nonce, evidence: evidence as Record<string, unknown> | null };
}

function base64Field(evidence: Record<string, unknown> | null, name: string): Uint8Array | undefined {
  const value = evidence?.[name];
  if (typeof value !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(value)) return undefined;
  return new Uint8Array(Buffer.from(value, 'base64'));
}

function reportDataCheck(actual: Uint8Array, expected: Uint8Array, nonceHex: string): Check {
  const what = nonceHex === '' ? 'SHA-512(JCS(JWKS)) (no nonce: the start evidence, not fresh)' : `SHA-512(nonce ${nonceHex} || JCS(JWKS))`;
  return Buffer.from(actual).equals(Buffer.from(expected))
    ? pass('attestation.report_data', `the evidence's REPORT_DATA equals ${what}: it binds this JWKS`)
    : fail('attestation.report_data', `the evidence's REPORT_DATA ${toHex(actual)} is not ${what} = ${toHex(expected)}`);
}

function measurementCheck(actual: Uint8Array, field: string, documentMeasurement: string, expected: string | undefined): Check {
  const hex = toHex(actual);
  if (hex !== documentMeasurement.toLowerCase()) {
    return fail('attestation.measurement', `the evidence's ${field} ${hex} differs from the document's measurement ${documentMeasurement}`);
  }
  if (expected !== undefined && hex !== expected.toLowerCase()) {
    return fail('attestation.measurement', `the evidence's ${field} ${hex} differs from the expected measurement ${expected}`);
  }
  return pass('attestation.measurement', `${field} ${hex}${expected === undefined ? ' (equals the document; no expected value given)' : ' equals the expected measurement'}`);
}

/**
 * Verifies an attestation document (GET /v1/verify/attestation, SPEC 5) as a skeptical client: the hardware
 * evidence's signatures and certificate chain up to AMD's or Intel's root, its REPORT_DATA against
 * SHA-512(nonce || JCS(jwks)), and its launch measurement against the document and the receipts. One named
 * check per fact; the evidence is trustworthy only if every check passes.
 */
export async function verifyAttestationDocument(doc: unknown, opts: VerifyAttestationOptions): Promise<Check[]> {
  const fields = readDocument(doc);
  if (typeof fields === 'string') return [fail('attestation.document', fields)];
  if (fields.tee === 'none') return [fail('attestation.tee', 'no hardware evidence: tee is none (development only)')];

  const roots = opts.roots ?? DEFAULT_TRUST_ROOTS;
  const now = opts.now ?? new Date();
  const nonce = opts.nonce ?? new Uint8Array(Buffer.from(fields.nonce, 'hex'));
  const expected = expectedReportData(nonce, opts.jwks);
  const nonceHex = toHex(nonce);

  if (fields.tee === 'sev-snp') {
    const report = base64Field(fields.evidence, 'report');
    if (report === undefined) return [fail('attestation.document', 'tee is sev-snp but evidence.report is not base64')];
    const certificates = base64Field(fields.evidence, 'certificates') ?? new Uint8Array(0);
    const result = verifySnpEvidence(report, certificates, roots, now);
    if (result.report === undefined) return result.checks;
    return [
      ...result.checks,
      reportDataCheck(result.report.reportData, expected, nonceHex),
      measurementCheck(result.report.measurement, 'MEASUREMENT', fields.measurement, opts.expectedMeasurement),
    ];
  }

  const quoteBytes = base64Field(fields.evidence, 'quote');
  if (quoteBytes === undefined) return [fail('attestation.document', 'tee is tdx but evidence.quote is not base64')];
  const result = verifyTdxEvidence(quoteBytes, roots, now);
  if (result.quote === undefined) return result.checks;
  return [
    ...result.checks,
    reportDataCheck(result.quote.body.reportData, expected, nonceHex),
    measurementCheck(result.quote.body.mrTd, 'MRTD', fields.measurement, opts.expectedMeasurement),
  ];
}
