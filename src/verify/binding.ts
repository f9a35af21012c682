import { ATTESTATION_DOCUMENT_VERSION, reportDataV2, type AttestationBinding } from '../protocol/attestation.ts';
import { canonicalJson } from '../protocol/jcs.ts';
import { fail, pass } from './check.ts';
import type { Check } from './check.ts';

/** `doc[name]` when doc is an object; undefined otherwise. */
export function field(doc: unknown, name: string): unknown {
  return typeof doc === 'object' && doc !== null ? (doc as Record<string, unknown>)[name] : undefined;
}

/** The two values have the same RFC 8785 canonical JSON (false when either cannot be canonicalized). */
export function sameJson(a: unknown, b: unknown): boolean {
  try {
    return a !== undefined && canonicalJson(a) === canonicalJson(b);
  } catch {
    return false;
  }
}

/** The document's `binding` when it has the shape of docs/attestation.md; a sentence saying what is wrong otherwise. */
export function readBinding(doc: unknown): AttestationBinding | string {
  const b = field(doc, 'binding');
  if (typeof b !== 'object' || b === null || Array.isArray(b)) return 'the document has no binding object';
  const r = b as Record<string, unknown>;
  if (!Array.isArray(field(r.jwks, 'keys'))) return 'binding.jwks is not a JWKS';
  if (typeof r.policy_hash !== 'string') return 'binding.policy_hash is not a string';
  if (r.tls_spki_sha256 !== null && (typeof r.tls_spki_sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(r.tls_spki_sha256)))
    return 'binding.tls_spki_sha256 is neither null nor 64 lowercase hex digits';
  if (r.hpke_key_config !== null && typeof r.hpke_key_config !== 'string') return 'binding.hpke_key_config is neither null nor a string';
  if (!Array.isArray(r.gpu_evidence_sha256) || !r.gpu_evidence_sha256.every((h) => typeof h === 'string'))
    return 'binding.gpu_evidence_sha256 is not a list of hex strings';
  return b as AttestationBinding;
}

/** REPORT_DATA the document's own binding and `nonce` give (docs/attestation.md), or undefined when the binding cannot be hashed. */
export function expectedReportData(nonce: Uint8Array, binding: AttestationBinding): Uint8Array | undefined {
  try {
    return reportDataV2(nonce, binding);
  } catch {
    return undefined;
  }
}

/**
 * What ties the receipts' keys to an attestation document, checked without hardware: the document is
 * version 2, answers our nonce, its binding carries the very JWKS the receipt verified against, and its
 * report_data is SHA-512("sigil-attestation-v2" || 0x00 || nonce || SHA-256(JCS(binding))). Only the
 * hardware evidence check proves the enclave produced that report_data; these checks prove the document
 * speaks of this JWKS and this nonce.
 */
export function verifyJwksBinding(doc: unknown, opts: { jwks: unknown; nonce: Uint8Array }): Check[] {
  const version = field(doc, 'version');
  if (version !== ATTESTATION_DOCUMENT_VERSION) {
    return [
      fail('binding.version', `the attestation document's version is ${JSON.stringify(version)}; this verifier reads version ${ATTESTATION_DOCUMENT_VERSION}`),
    ];
  }
  const checks: Check[] = [];
  const nonceHex = Buffer.from(opts.nonce).toString('hex');
  const docNonce = field(doc, 'nonce');
  const isStart = /^0+$/.test(nonceHex);
  checks.push(
    docNonce === nonceHex
      ? pass('binding.nonce', isStart ? 'the document is the start evidence (all-zero nonce: not fresh)' : `the document answers our fresh nonce ${nonceHex}`)
      : fail('binding.nonce', `the document's nonce is ${JSON.stringify(docNonce)}; we sent ${JSON.stringify(nonceHex)}`),
  );
  const binding = readBinding(doc);
  if (typeof binding === 'string') return [...checks, fail('binding.document', binding)];
  checks.push(
    sameJson(binding.jwks, opts.jwks)
      ? pass('binding.jwks', 'the attestation binds the same JWKS the receipt was verified against')
      : fail('binding.jwks', 'the attestation binds a different JWKS from the one the receipt was verified against'),
  );
  const reportData = field(doc, 'report_data');
  const expected = expectedReportData(opts.nonce, binding);
  const expectedHex = expected === undefined ? '' : Buffer.from(expected).toString('hex');
  checks.push(
    typeof reportData === 'string' && expectedHex !== '' && reportData.toLowerCase() === expectedHex
      ? pass('binding.report_data', 'report_data is the labelled SHA-512 of our nonce and the binding (docs/attestation.md)')
      : fail(
          'binding.report_data',
          `report_data is ${JSON.stringify(reportData)}; SHA-512("sigil-attestation-v2" || 0 || nonce || SHA-256(JCS(binding))) is ${expectedHex || 'not computable'}`,
        ),
  );
  return checks;
}

/** The raw evidence bytes an attestation document carries (SNP report and certificate table, or TDX quote), whose SHA-256 is `attestation_hash`. */
export function evidenceBytes(doc: unknown): Uint8Array | undefined {
  const b64 = field(doc, 'evidence');
  return typeof b64 === 'string' ? new Uint8Array(Buffer.from(b64, 'base64')) : undefined;
}
