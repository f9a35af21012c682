import { tdxMeasurements } from './attestation.ts';
import { fail, notPinned, pass, type Check } from './check.ts';
import { toHex } from './evidence/byte-reader.ts';
import type { IntelCollateral } from './evidence/collateral/intel-collateral.ts';
import type { EventListing } from './evidence/event-log/measured-event.ts';
import { verifyTdxEventLog, type TdxEventLogInput } from './evidence/event-log/tdx-event-log.ts';
import { encodeSnpCertTable, SNP_CERT_GUID } from './evidence/snp-cert-table.ts';
import { verifySnpEvidence } from './evidence/snp-verify.ts';
import { verifyTdxEvidence, verifyTdxEvidenceWithCollateral } from './evidence/tdx-verify.ts';
import { DEFAULT_TRUST_ROOTS, type TrustRoots } from './evidence/trust-roots.ts';
import { snpReferenceChecks, tdxReferenceChecks } from './reference/reference-checks.ts';
import type { ReferenceValues } from './reference/reference-values.ts';

/** Hardware evidence without a service (docs/auditing.md, "Raw evidence without a service"), already read into bytes. */
export type RawEvidence =
  | { tee: 'tdx'; quote: Uint8Array; eventLog?: TdxEventLogInput; collateral?: IntelCollateral }
  /** `vcek` and `ask` are DER certificates; the ASK defaults to the built-in ones. */
  | {
      tee: 'sev-snp';
      report: Uint8Array;
      vcek?: Uint8Array;
      ask?: Uint8Array;
      /** AMD's CRL for the product (DER or PEM), checked as snp.crl. */ crl?: Uint8Array;
    };

export interface RawEvidenceExpectations {
  /** The 64 bytes REPORT_DATA must hold, as hex; absent, `evidence.report_data` is NOT PINNED. */
  reportData?: string;
  reference?: ReferenceValues;
  roots?: TrustRoots;
  /** The time certificates and collateral must be valid at. */
  at: Date;
}

export interface RawEvidenceVerification {
  tee: 'tdx' | 'sev-snp';
  /** Every value the evidence measured or states, for a report. */
  measured: Record<string, unknown>;
  checks: Check[];
  /** The TDX event log's events, replayed into the RTMRs. */
  events?: EventListing[];
}

function reportDataCheck(actual: Uint8Array, expected: string | undefined): Check {
  const hex = toHex(actual);
  if (expected === undefined) {
    return notPinned(
      'evidence.report_data',
      `REPORT_DATA ${hex} was compared with nothing (--report-data HEX): raw evidence proves neither freshness nor what key or nonce it is bound to`,
    );
  }
  return hex === expected.toLowerCase()
    ? pass('evidence.report_data', 'REPORT_DATA equals the expected 64 bytes: the evidence was made for this nonce or key')
    : fail('evidence.report_data', `REPORT_DATA ${hex} is not the expected ${expected.toLowerCase()}: the evidence was made for something else`);
}

async function verifyTdx(evidence: Extract<RawEvidence, { tee: 'tdx' }>, expect: RawEvidenceExpectations, roots: TrustRoots): Promise<RawEvidenceVerification> {
  const result =
    evidence.collateral === undefined
      ? verifyTdxEvidence(evidence.quote, roots, expect.at, expect.reference?.tdx)
      : await verifyTdxEvidenceWithCollateral(evidence.quote, roots, expect.at, expect.reference?.tdx, evidence.collateral);
  const quote = result.quote;
  if (quote === undefined) return { tee: 'tdx', measured: {}, checks: result.checks };
  const measured = tdxMeasurements(quote.body);
  const log = verifyTdxEventLog(evidence.eventLog ?? {}, quote.body.rtmr);
  const b = quote.body;
  return {
    tee: 'tdx',
    measured: {
      ...measured,
      mr_config_id: toHex(b.mrConfigId),
      mr_owner: toHex(b.mrOwner),
      mr_owner_config: toHex(b.mrOwnerConfig),
      td_attributes: toHex(b.tdAttributes),
      xfam: toHex(b.xfam),
      mrseam: toHex(b.mrSeam),
      tee_tcb_svn: toHex(b.teeTcbSvn),
      report_data: toHex(b.reportData),
    },
    checks: [...result.checks, reportDataCheck(b.reportData, expect.reportData), ...tdxReferenceChecks(measured, expect.reference), ...log.checks],
    events: log.events,
  };
}

/** Bits 2-4 of the report's flags name the signing key; 1 is the VLEK. */
function reportSignedByVlek(report: Uint8Array): boolean {
  return report.length >= 0x4c && ((report[0x48]! >> 2) & 0b111) === 1;
}

function verifySnp(evidence: Extract<RawEvidence, { tee: 'sev-snp' }>, expect: RawEvidenceExpectations, roots: TrustRoots): RawEvidenceVerification {
  const entries: Array<{ guid: string; der: Uint8Array }> = [];
  if (evidence.vcek !== undefined) entries.push({ guid: reportSignedByVlek(evidence.report) ? SNP_CERT_GUID.vlek : SNP_CERT_GUID.vcek, der: evidence.vcek });
  if (evidence.ask !== undefined) entries.push({ guid: SNP_CERT_GUID.ask, der: evidence.ask });
  const table = entries.length === 0 ? new Uint8Array(0) : encodeSnpCertTable(entries);
  const result = verifySnpEvidence(evidence.report, table, roots, expect.at, expect.reference?.snp, evidence.crl === undefined ? {} : { crl: evidence.crl });
  const r = result.report;
  if (r === undefined) return { tee: 'sev-snp', measured: {}, checks: result.checks };
  const measured = { measurement: toHex(r.measurement), host_data: toHex(r.hostData) };
  const tcb = (t: typeof r.reportedTcb) => `0x${t.raw.toString(16).padStart(16, '0')}`;
  return {
    tee: 'sev-snp',
    measured: {
      ...measured,
      report_data: toHex(r.reportData),
      chip_id: toHex(r.chipId),
      vmpl: r.vmpl,
      policy: `0x${r.policy.raw.toString(16)}`,
      reported_tcb: tcb(r.reportedTcb),
      launch_tcb: tcb(r.launchTcb),
      current_tcb: tcb(r.currentTcb),
      committed_tcb: tcb(r.committedTcb),
      family_id: toHex(r.familyId),
      image_id: toHex(r.imageId),
      guest_svn: r.guestSvn,
    },
    checks: [...result.checks, reportDataCheck(r.reportData, expect.reportData), ...snpReferenceChecks(measured, expect.reference)],
  };
}

/**
 * Verifies raw TDX or SEV-SNP evidence: signatures and chains up to AMD's or Intel's root, platform policy, the
 * TDX event log replayed into RTMR0-3, Intel's collateral when given, REPORT_DATA against the expected bytes and
 * the measured values against the reference values. One named check per fact, as `verifyService` gives.
 */
export async function verifyRawEvidence(evidence: RawEvidence, expect: RawEvidenceExpectations): Promise<RawEvidenceVerification> {
  const roots = expect.roots ?? DEFAULT_TRUST_ROOTS;
  return evidence.tee === 'tdx' ? verifyTdx(evidence, expect, roots) : verifySnp(evidence, expect, roots);
}
