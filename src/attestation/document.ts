import { createHash } from 'node:crypto';
import { canonicalJson } from '../protocol/jcs.ts';
import type { RawEvidence, Tee } from './provider.ts';

export interface Jwks {
  keys: Array<Record<string, unknown>>;
}

/** SPEC 5: REPORT_DATA = SHA-512(nonce bytes || UTF-8 of the JCS-canonical JWKS). */
export function reportDataFor(nonce: Uint8Array, jwks: Jwks): Uint8Array {
  return createHash('sha512').update(nonce).update(canonicalJson(jwks), 'utf8').digest();
}

/** The body of GET /v1/verify/attestation. */
export interface AttestationDocument {
  tee: Tee;
  measurement: string;
  /** Hex of the nonce bytes the report data binds; "" for the evidence made at start. */
  nonce: string;
  report_data: string;
  jwks: Jwks;
  /** base64 of the raw evidence; null when tee is none. */
  evidence: { report: string; certificates: string } | { quote: string } | null;
}

export function attestationDocument(raw: RawEvidence, nonce: Uint8Array, jwks: Jwks): AttestationDocument {
  const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
  let evidence: AttestationDocument['evidence'] = null;
  if (raw.tee === 'sev-snp') evidence = { report: b64(raw.outblob), certificates: b64(raw.auxblob) };
  if (raw.tee === 'tdx') evidence = { quote: b64(raw.outblob) };
  return {
    tee: raw.tee,
    measurement: raw.measurement,
    nonce: Buffer.from(nonce).toString('hex'),
    report_data: Buffer.from(raw.reportData).toString('hex'),
    jwks,
    evidence,
  };
}

/** The `attestation_hash` claim: SHA-256 of the hardware evidence bytes; absent without hardware. */
export function attestationHash(raw: RawEvidence): string | undefined {
  if (raw.tee === 'none') return undefined;
  return 'sha256:' + createHash('sha256').update(raw.outblob).digest('hex');
}
