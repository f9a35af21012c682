import { verify as verifySignature, type X509Certificate } from 'node:crypto';
import { fail, pass } from '../check.ts';
import type { Check } from '../check.ts';
import { toHex } from './byte-reader.ts';
import { commonName, issuanceProblem, readCertificate, sameCertificate } from './certificate-chain.ts';
import { describeEvidenceError } from './errors.ts';
import { readSnpCertTable, type SnpCertEntry } from './snp-cert-table.ts';
import { readSnpReport, SNP_SIGNATURE_ALGO_ECDSA_P384_SHA384, type SnpReport } from './snp-report.ts';
import { readAmdCertificateTcb, type AmdCertificateTcb } from './amd-vcek-extensions.ts';
import { snpGuestChecks } from './snp-guest-checks.ts';
import { reportCpuFamily, snpPlatformChecks } from './snp-policy.ts';
import type { SnpReferenceValues } from '../reference/reference-values.ts';
import type { TrustRoots } from './trust-roots.ts';
import { amdCrlCheck, type AmdCrlChain } from './amd-crl.ts';

/** AMD collateral for one report, as `sigil collateral fetch` writes it (collateral/amd-collateral.ts). */
export interface SnpEvidenceCollateral {
  /** AMD's CRL for the product (KDS /vcek/v1/{product}/crl or /vlek/v1/{product}/crl), DER or PEM. */
  crl?: Uint8Array;
}

export interface SnpEvidenceResult {
  checks: Check[];
  /** Present when the report could be read. */
  report?: SnpReport;
}

function signatureCheck(report: SnpReport, signer: X509Certificate, signerName: string): Check {
  if (report.signatureAlgo !== SNP_SIGNATURE_ALGO_ECDSA_P384_SHA384) {
    return fail('snp.report_signature', `signature algorithm ${report.signatureAlgo} is not ECDSA P-384 with SHA-384 (1)`);
  }
  const key = signer.publicKey;
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'secp384r1') {
    return fail('snp.report_signature', `the ${signerName} key is not an ECDSA P-384 key`);
  }
  const signature = Buffer.concat([report.signature.r, report.signature.s]);
  if (signature.every((b) => b === 0)) {
    return fail(
      'snp.report_signature',
      report.maskChipKey
        ? "the report is unsigned: MASK_CHIP_KEY is set, so the host configured AMD's firmware (SNP_CONFIG) not to sign reports with the chip's key, and the signature is all zeros; nothing shows AMD hardware made this report"
        : 'the report is unsigned: its signature is all zeros, so nothing shows AMD hardware made it',
    );
  }
  let ok = false;
  try {
    ok = verifySignature('sha384', report.signedBytes, { key, dsaEncoding: 'ieee-p1363' }, signature);
  } catch {
    ok = false;
  }
  return ok
    ? pass('snp.report_signature', `report bytes 0x000-0x29F signed by the ${signerName} (ECDSA P-384, SHA-384)`)
    : fail('snp.report_signature', `the report's signature does not verify with the ${signerName} public key`);
}

/**
 * Finds which of `candidates` issued `child`, by name and signature whatever the time, so a certificate table without
 * ASK still chains through the built-in ones, and an expired certificate is reported as expired rather than as issued
 * by nobody.
 */
function findIssuer(child: X509Certificate, candidates: X509Certificate[]): X509Certificate | undefined {
  return candidates.find((c) => issuanceProblem(child, c, new Date(child.validFrom)) === null);
}

/** An issuance problem in words, naming expiry plainly: an expired VCEK or VLEK is the commonest, and AMD issues a new one for the asking. */
function signerProblem(signer: X509Certificate, signerName: string, intermediate: X509Certificate, now: Date): string | null {
  const problem = issuanceProblem(signer, intermediate, now);
  if (problem === null) return null;
  const from = new Date(signer.validFrom);
  const to = new Date(signer.validTo);
  if (issuanceProblem(signer, intermediate, from) !== null) return problem;
  if (now > to)
    return `the ${signerName} (${commonName(signer)}, issued by ${commonName(intermediate)}) expired at ${to.toISOString()} (now ${now.toISOString()}): a report signed by it is no longer vouched for by AMD; fetch a current ${signerName} from AMD's KDS`;
  return `the ${signerName} (${commonName(signer)}) is not valid until ${from.toISOString()} (now ${now.toISOString()}): check the clock, or the certificate was issued for later`;
}

interface ChainResult {
  checks: Check[];
  /** Present when the chain verified up to a trusted ARK: what the AMD CRL is checked against. */
  trusted?: AmdCrlChain;
}

function chainChecks(signer: X509Certificate, signerName: string, table: SnpCertEntry[], roots: TrustRoots, now: Date): ChainResult {
  const trustedArks = roots.amdArks.map((pem, i) => readCertificate(pem, `built-in AMD ARK ${i}`));
  const tableAsk = table.find((e) => e.kind === 'ask');
  const tableArk = table.find((e) => e.kind === 'ark');
  let intermediate: X509Certificate | undefined;
  let intermediateFrom = 'the certificate table';
  if (tableAsk !== undefined) {
    intermediate = readCertificate(tableAsk.data, 'ASK from the certificate table');
  } else {
    intermediateFrom = 'the built-in AMD signing keys';
    intermediate = findIssuer(
      signer,
      roots.amdIntermediates.map((pem, i) => readCertificate(pem, `built-in AMD intermediate ${i}`)),
    );
    if (intermediate === undefined) {
      return {
        checks: [
          fail('snp.vcek_chain', `the certificate table has no ASK and no built-in AMD signing key issued the ${signerName} (${commonName(signer)})`),
          fail('snp.root', 'no chain to check against the AMD roots'),
        ],
      };
    }
  }
  const leafProblem = signerProblem(signer, signerName, intermediate, now);
  if (leafProblem !== null) {
    return { checks: [fail('snp.vcek_chain', leafProblem), fail('snp.root', 'no valid chain to check against the AMD roots')] };
  }
  let ark: X509Certificate | undefined;
  let arkFrom = 'the certificate table';
  if (tableArk !== undefined) {
    ark = readCertificate(tableArk.data, 'ARK from the certificate table');
  } else {
    arkFrom = 'the built-in AMD roots';
    ark = findIssuer(intermediate, trustedArks);
    if (ark === undefined) {
      return {
        checks: [
          fail('snp.vcek_chain', `the certificate table has no ARK and no built-in AMD root issued ${commonName(intermediate)}`),
          fail('snp.root', `${commonName(intermediate)} does not chain to a built-in AMD root`),
        ],
      };
    }
  }
  const midProblem = issuanceProblem(intermediate, ark, now) ?? issuanceProblem(ark, ark, now);
  const checks: Check[] = [
    midProblem === null
      ? pass(
          'snp.vcek_chain',
          `${commonName(signer)} <- ${commonName(intermediate)} (${intermediateFrom}) <- ${commonName(ark)} (${arkFrom}, self-signed); RSA-PSS SHA-384 signatures and validity checked`,
        )
      : fail('snp.vcek_chain', midProblem),
  ];
  const trusted = trustedArks.find((t) => sameCertificate(t, ark));
  checks.push(
    trusted !== undefined
      ? pass('snp.root', `the chain ends at ${commonName(ark)}, a trusted AMD root (SHA-256 ${ark.fingerprint256})`)
      : fail('snp.root', `the chain ends at ${commonName(ark)} (SHA-256 ${ark.fingerprint256}), which is not a trusted AMD root`),
  );
  return midProblem === null && trusted !== undefined ? { checks, trusted: { ark: trusted, intermediate } } : { checks };
}

/**
 * Checks an SEV-SNP report and its certificate table: the report's own signature, the VCEK/VLEK -> ASK -> ARK chain,
 * that the ARK is a trusted AMD root, and the platform policy (snp-policy.ts) against `reference`. REPORT_DATA and MEASUREMENT
 * are compared by the caller, who knows what they must be.
 */
export function verifySnpEvidence(
  reportBytes: Uint8Array,
  certTableBytes: Uint8Array,
  roots: TrustRoots,
  now: Date = new Date(),
  reference?: SnpReferenceValues,
  collateral: SnpEvidenceCollateral = {},
): SnpEvidenceResult {
  let report: SnpReport;
  try {
    report = readSnpReport(reportBytes);
  } catch (err) {
    return { checks: [fail('snp.report', describeEvidenceError(err))] };
  }
  const read = `SEV-SNP report version ${report.version}, VMPL ${report.vmpl}, guest SVN ${report.guestSvn}, signed by ${report.signingKey.toUpperCase()}, chip ${toHex(report.chipId).slice(0, 16)}...`;
  const checks: Check[] = [
    report.unsignedNonZero.length === 0
      ? pass('snp.report', read)
      : fail(
          'snp.report',
          `${read}; but bytes ${report.unsignedNonZero.join(', ')} are not zero: they lie outside the signed part of the report (0x000-0x29F), AMD's firmware leaves them zero, and nobody signed what is there, so the report is refused as altered`,
        ),
  ];
  const signer = signerChecks(report, certTableBytes, roots, now);
  checks.push(...signer.checks);
  const tableCrl = signer.table?.find((e) => e.kind === 'crl')?.data;
  checks.push(
    collateral.crl !== undefined
      ? amdCrlCheck(collateral.crl, 'the collateral bundle (amd-crl.der)', signer.trusted, now, reference)
      : amdCrlCheck(tableCrl, "the certificate table's CRL entry", signer.trusted, now, reference),
  );
  let extensions: AmdCertificateTcb | undefined;
  try {
    extensions = signer.certificate === undefined ? undefined : readAmdCertificateTcb(new Uint8Array(signer.certificate.raw));
  } catch {
    extensions = undefined;
  }
  checks.push(...snpPlatformChecks(report, reportCpuFamily(reportBytes, report.version), extensions, reference));
  checks.push(...snpGuestChecks(report, reportBytes, signer.certificate, reference));
  return { checks, report };
}

interface SignerResult {
  checks: Check[];
  certificate?: X509Certificate;
  table?: SnpCertEntry[];
  trusted?: AmdCrlChain;
}

function signerChecks(report: SnpReport, certTableBytes: Uint8Array, roots: TrustRoots, now: Date): SignerResult {
  const notChecked = (why: string): Check[] => [
    fail('snp.report_signature', `not checked: ${why}`),
    fail('snp.vcek_chain', `not checked: ${why}`),
    fail('snp.root', `not checked: ${why}`),
  ];
  if (report.signingKey !== 'vcek' && report.signingKey !== 'vlek') {
    return { checks: [fail('snp.cert_table', `the report says it is signed by no endorsement key (${report.signingKey})`), ...notChecked('no signing key')] };
  }
  const signerName = report.signingKey.toUpperCase();
  if (certTableBytes.length === 0) {
    return { checks: [fail('snp.cert_table', `no certificate table: the evidence carries no ${signerName} certificate`), ...notChecked(`no ${signerName}`)] };
  }
  let table: SnpCertEntry[];
  let signer: X509Certificate;
  try {
    table = readSnpCertTable(certTableBytes);
    const entry = table.find((e) => e.kind === report.signingKey);
    if (entry === undefined) {
      return {
        checks: [
          fail('snp.cert_table', `the certificate table has no ${signerName} entry (has: ${table.map((e) => e.kind).join(', ') || 'nothing'})`),
          ...notChecked(`no ${signerName}`),
        ],
      };
    }
    signer = readCertificate(entry.data, `${signerName} from the certificate table`);
  } catch (err) {
    return { checks: [fail('snp.cert_table', describeEvidenceError(err)), ...notChecked('unreadable certificate table')] };
  }
  const checks: Check[] = [pass('snp.cert_table', `certificate table with ${table.map((e) => e.kind.toUpperCase()).join(', ')}`)];
  checks.push(signatureCheck(report, signer, signerName));
  let trusted: AmdCrlChain | undefined;
  try {
    const chain = chainChecks(signer, signerName, table, roots, now);
    checks.push(...chain.checks);
    trusted = chain.trusted;
  } catch (err) {
    checks.push(fail('snp.vcek_chain', describeEvidenceError(err)), fail('snp.root', 'not checked: unreadable certificate'));
  }
  return trusted === undefined ? { checks, certificate: signer, table } : { checks, certificate: signer, table, trusted };
}
