import { fail, pass } from './check.ts';
import type { Check } from './check.ts';
import { canonicalJson } from './digest.ts';
import { expectedReportData } from './evidence/report-data.ts';

function field(doc: unknown, name: string): unknown {
  return typeof doc === 'object' && doc !== null ? (doc as Record<string, unknown>)[name] : undefined;
}

/**
 * What ties the receipts' keys to an attestation document, checked without hardware: the document
 * answers our nonce, carries the very JWKS the receipt verified against, and its report_data is
 * SHA-512(nonce || JCS(JWKS)). Only the hardware evidence check proves the enclave produced that
 * report_data; these checks prove the document is about this JWKS and this nonce.
 */
export function verifyJwksBinding(doc: unknown, opts: { jwks: unknown; nonce: Uint8Array }): Check[] {
  const checks: Check[] = [];
  const nonceHex = Buffer.from(opts.nonce).toString('hex');
  const docNonce = field(doc, 'nonce');
  checks.push(
    docNonce === nonceHex
      ? pass('binding.nonce', nonceHex === '' ? 'the document is the start evidence (no nonce)' : `the document answers our fresh nonce ${nonceHex}`)
      : fail('binding.nonce', `the document's nonce is ${JSON.stringify(docNonce)}; we sent ${JSON.stringify(nonceHex)}`),
  );
  const docJwks = field(doc, 'jwks');
  let same = false;
  try {
    same = docJwks !== undefined && canonicalJson(docJwks) === canonicalJson(opts.jwks);
  } catch {
    same = false;
  }
  checks.push(
    same
      ? pass('binding.jwks', 'the attestation document binds the same JWKS the receipt was verified against')
      : fail('binding.jwks', 'the attestation document binds a different JWKS from the one the receipt was verified against'),
  );
  const reportData = field(doc, 'report_data');
  let expected = '';
  try {
    expected = Buffer.from(expectedReportData(opts.nonce, opts.jwks as { keys: object[] })).toString('hex');
  } catch {
    expected = '';
  }
  checks.push(
    typeof reportData === 'string' && expected !== '' && reportData.toLowerCase() === expected
      ? pass('binding.report_data', 'report_data equals SHA-512(nonce || JCS(JWKS))')
      : fail('binding.report_data', `report_data is ${JSON.stringify(reportData)}; SHA-512(nonce || JCS(JWKS)) is ${expected}`),
  );
  return checks;
}

/** The raw evidence bytes an attestation document carries (SNP report or TDX quote), whose SHA-256 is `attestation_hash`. */
export function evidenceBytes(doc: unknown): Uint8Array | undefined {
  const evidence = field(doc, 'evidence');
  const b64 = field(evidence, 'report') ?? field(evidence, 'quote');
  return typeof b64 === 'string' ? new Uint8Array(Buffer.from(b64, 'base64')) : undefined;
}
