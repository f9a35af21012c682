import { createHash, createPublicKey, verify as verifySignature, type KeyObject, type X509Certificate } from 'node:crypto';
import { fail, notPinned, pass } from '../check.ts';
import type { Check } from '../check.ts';
import { toHex } from './byte-reader.ts';
import { commonName, issuanceProblem, readCertificate, readPemCertificates, sameCertificate } from './certificate-chain.ts';
import { describeEvidenceError } from './errors.ts';
import { readTdxQuote, TDX_BODY_15_SIZE, TDX_BODY_SIZE, type TdxQuote } from './tdx-quote.ts';
import { tdxInstanceCheck } from './tdx-instance.ts';
import { tdxPlatformChecks, type TdxTcbVerdict } from './tdx-policy.ts';
import type { TdxReferenceValues } from '../reference/reference-values.ts';
import { verifyIntelCollateral, type IntelCollateral } from './collateral/intel-collateral.ts';
import type { TrustRoots } from './trust-roots.ts';

export interface TdxEvidenceResult {
  checks: Check[];
  /** Present when the quote could be read. */
  quote?: TdxQuote;
}

/** The quote carries the attestation key as raw x||y; an invalid point is refused by createPublicKey. */
function p256Key(raw: Uint8Array): KeyObject {
  const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64url');
  return createPublicKey({ key: { kty: 'EC', crv: 'P-256', x: b64(raw.subarray(0, 32)), y: b64(raw.subarray(32, 64)) }, format: 'jwk' });
}

function verifiesP256(key: KeyObject, data: Uint8Array, signature: Uint8Array): boolean {
  try {
    return verifySignature('sha256', data, { key, dsaEncoding: 'ieee-p1363' }, signature);
  } catch {
    return false;
  }
}

function quoteSignatureCheck(quote: TdxQuote): Check {
  let key: KeyObject;
  try {
    key = p256Key(quote.attestationKey);
  } catch {
    return fail('tdx.quote_signature', 'the attestation key in the quote is not a P-256 point');
  }
  return verifiesP256(key, quote.signedBytes, quote.signature)
    ? pass('tdx.quote_signature', 'header and TD report body signed by the quote attestation key (ECDSA P-256, SHA-256)')
    : fail('tdx.quote_signature', 'the quote signature does not verify with the attestation key');
}

function bindingCheck(quote: TdxQuote): Check {
  const hash = createHash('sha256').update(quote.attestationKey).update(quote.qeAuthData).digest();
  const bound = Buffer.from(quote.qeReport.reportData.subarray(0, 32)).equals(hash);
  const padded = quote.qeReport.reportData.subarray(32).every((b) => b === 0);
  if (bound && padded) {
    return pass('tdx.qe_binding', 'the QE report data is SHA-256(attestation key || QE auth data): the Quoting Enclave vouches for the attestation key');
  }
  return fail(
    'tdx.qe_binding',
    `the QE report data ${toHex(quote.qeReport.reportData.subarray(0, 32))} is not SHA-256(attestation key || QE auth data) ${hash.toString('hex')}${padded ? '' : ' (and its upper half is not zero)'}`,
  );
}

function chainChecks(quote: TdxQuote, roots: TrustRoots, now: Date): { checks: Check[]; pck?: X509Certificate } {
  let chain: X509Certificate[];
  try {
    chain = readPemCertificates(quote.pckChainPem, 'PCK chain');
  } catch (err) {
    return { checks: [fail('tdx.pck_chain', describeEvidenceError(err)), fail('tdx.root', 'not checked: unreadable PCK chain')] };
  }
  if (chain.length < 2) {
    return {
      checks: [
        fail('tdx.pck_chain', `the PCK chain holds ${chain.length} certificate(s); expected the PCK certificate and its CA`),
        fail('tdx.root', 'not checked: no chain'),
      ],
    };
  }
  const trustedRoots = roots.intelRoots.map((pem, i) => readCertificate(pem, `built-in Intel root ${i}`));
  const pck = chain[0]!;
  const checks: Check[] = [];
  let problem: string | null = null;
  for (let i = 0; i + 1 < chain.length && problem === null; i++) problem = issuanceProblem(chain[i]!, chain[i + 1]!, now);
  const top = chain[chain.length - 1]!;
  const topSelfSigned = issuanceProblem(top, top, now) === null;
  if (problem === null && !topSelfSigned) {
    // A chain may stop below the root; then its top must be issued by a trusted root.
    const issuer = trustedRoots.find((root) => issuanceProblem(top, root, now) === null);
    if (issuer === undefined) problem = `${commonName(top)} is neither self-signed nor issued by a trusted Intel root`;
  }
  const names = chain.map(commonName).join(' <- ');
  checks.push(problem === null ? pass('tdx.pck_chain', `${names}; ECDSA signatures and validity checked`) : fail('tdx.pck_chain', problem));
  const trusted = topSelfSigned
    ? trustedRoots.some((root) => sameCertificate(root, top))
    : trustedRoots.some((root) => issuanceProblem(top, root, now) === null);
  checks.push(
    trusted
      ? pass('tdx.root', `the PCK chain ends at a trusted Intel root (${commonName(top)}, SHA-256 ${top.fingerprint256})`)
      : fail('tdx.root', `the PCK chain ends at ${commonName(top)} (SHA-256 ${top.fingerprint256}), which is not a trusted Intel root`),
  );
  return { checks, pck };
}

function qeReportSignatureCheck(quote: TdxQuote, pck: X509Certificate | undefined): Check {
  if (pck === undefined) return fail('tdx.qe_report_signature', 'not checked: no PCK certificate');
  const key = pck.publicKey;
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    return fail('tdx.qe_report_signature', 'the PCK certificate key is not an ECDSA P-256 key');
  }
  return verifiesP256(key, quote.qeReport.raw, quote.qeReportSignature)
    ? pass(
        'tdx.qe_report_signature',
        `the Quoting Enclave report (MRSIGNER ${toHex(quote.qeReport.mrSigner).slice(0, 16)}..., ISV SVN ${quote.qeReport.isvSvn}) is signed by the PCK key`,
      )
    : fail('tdx.qe_report_signature', 'the QE report signature does not verify with the PCK certificate key');
}

/** Intel's Quoting Enclave vendor id (the quote header's QE_VENDOR_ID for Intel's TD QE). */
export const INTEL_QE_VENDOR_ID = '939a7233f79c4ca9940a0db3957f0607';

/** The quote header names the enclave that made the quote; its SVN and the PCE's must meet the pinned floors. */
function quotingEnclaveCheck(quote: TdxQuote, reference: TdxReferenceValues | undefined): Check {
  const h = quote.header;
  const vendor = toHex(h.qeVendorId);
  if (vendor !== INTEL_QE_VENDOR_ID)
    return fail('tdx.qe', `QE vendor id ${vendor} is not Intel's (${INTEL_QE_VENDOR_ID}): the quote was made by a quoting enclave Sigil cannot vouch for`);
  const svns = `QE SVN ${h.qeSvn}, PCE SVN ${h.pceSvn}`;
  if (reference?.min_qe_svn === undefined && reference?.min_pce_svn === undefined) {
    return notPinned(
      'tdx.qe',
      `Intel's quoting enclave (vendor ${vendor}), ${svns}: no floor (tdx.min_qe_svn, tdx.min_pce_svn) was given, so an old quoting enclave would pass`,
    );
  }
  const low: string[] = [];
  if (reference.min_qe_svn !== undefined && h.qeSvn < reference.min_qe_svn) low.push(`QE SVN ${h.qeSvn} < ${reference.min_qe_svn}`);
  if (reference.min_pce_svn !== undefined && h.pceSvn < reference.min_pce_svn) low.push(`PCE SVN ${h.pceSvn} < ${reference.min_pce_svn}`);
  return low.length === 0
    ? pass('tdx.qe', `Intel's quoting enclave (vendor ${vendor}), ${svns}: at or above the pinned floors`)
    : fail('tdx.qe', `${low.join('; ')}: the quote was made by a quoting enclave older than the auditor accepts`);
}

/**
 * Checks a TDX quote v4 or v5: its signature by the attestation key, the QE report's signature by the PCK key, the QE
 * report's binding of the attestation key, the PCK chain to a trusted Intel root, and the platform policy
 * (tdx-policy.ts) against `reference` and, when collateral was verified, Intel's TCB `verdict`. REPORTDATA and MRTD are compared by the caller.
 */
export function verifyTdxEvidence(
  quoteBytes: Uint8Array,
  roots: TrustRoots,
  now: Date = new Date(),
  reference?: TdxReferenceValues,
  verdict?: TdxTcbVerdict,
): TdxEvidenceResult {
  let quote: TdxQuote;
  try {
    quote = readTdxQuote(quoteBytes);
  } catch (err) {
    return { checks: [fail('tdx.quote', describeEvidenceError(err))] };
  }
  const body = quote.bodyType === 3 ? `TD report 1.5 (body type 3, ${TDX_BODY_15_SIZE} bytes)` : `TD report 1.0 (${TDX_BODY_SIZE} bytes)`;
  const checks: Check[] = [pass('tdx.quote', `TDX quote v${quote.header.version}, ${body}, QE vendor ${toHex(quote.header.qeVendorId)}`)];
  checks.push(quoteSignatureCheck(quote));
  const chain = chainChecks(quote, roots, now);
  checks.push(
    qeReportSignatureCheck(quote, chain.pck),
    bindingCheck(quote),
    quotingEnclaveCheck(quote, reference),
    ...chain.checks,
    tdxInstanceCheck(chain.pck, reference),
  );
  checks.push(...tdxPlatformChecks(quote.body, reference, verdict));
  return { checks, quote };
}

/**
 * verifyTdxEvidence with Intel's collateral: the collateral is verified first (collateral/intel-collateral.ts), and
 * the TCB status it yields decides `tdx.tcb_status`; the collateral checks follow the quote's.
 */
export async function verifyTdxEvidenceWithCollateral(
  quoteBytes: Uint8Array,
  roots: TrustRoots,
  now: Date,
  reference: TdxReferenceValues | undefined,
  collateral: IntelCollateral,
): Promise<TdxEvidenceResult> {
  let quote: TdxQuote;
  try {
    quote = readTdxQuote(quoteBytes);
  } catch {
    return verifyTdxEvidence(quoteBytes, roots, now, reference);
  }
  const verified = await verifyIntelCollateral(quote, collateral, roots, now);
  const result = verifyTdxEvidence(quoteBytes, roots, now, reference, verified.verdict);
  return { ...result, checks: [...result.checks, ...verified.checks] };
}
