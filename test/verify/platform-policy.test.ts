import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { Check } from '../../src/verify/check.ts';
import { readAmdCertificateTcb } from '../../src/verify/evidence/amd-vcek-extensions.ts';
import { SNP_CERT_GUID } from '../../src/verify/evidence/snp-cert-table.ts';
import { verifySnpEvidence } from '../../src/verify/evidence/snp-verify.ts';
import { tcbStatusCheck } from '../../src/verify/evidence/tdx-policy.ts';
import { verifyTdxEvidence } from '../../src/verify/evidence/tdx-verify.ts';
import { DEFAULT_TRUST_ROOTS } from '../../src/verify/evidence/trust-roots.ts';
import { parseReferenceValues } from '../../src/verify/reference/reference-values.ts';
import { buildSnpCertTable } from '../support/evidence-fixtures.ts';

const vector = (path: string) => readFileSync(new URL(`../vectors/${path}`, import.meta.url));
const der = (pem: Buffer) => new Uint8Array(new X509Certificate(pem).raw);
const failing = (checks: Check[]) => checks.filter((c) => !c.ok).map((c) => c.name);
const detail = (checks: Check[], name: string) => checks.find((c) => c.name === name)!.detail;
const state = (checks: Check[], names: string[]) =>
  names.map((n) => checks.find((c) => c.name === n)).map((c) => (c === undefined ? 'absent' : !c.ok ? 'FAIL' : c.pinned === false ? 'not pinned' : 'PASS'));

// dstack's Milan attestation: a SCALE envelope whose 1184-byte report starts at byte 4.
const milanReport = new Uint8Array(vector('snp/dstack-milan-attestation.bin').subarray(4, 4 + 1184));
const milanVcek = der(vector('snp/dstack-milan-vcek.pem'));
const milanAsk = der(vector('snp/dstack-milan-ask.pem'));
const milanTable = buildSnpCertTable([
  { guid: SNP_CERT_GUID.vcek, der: milanVcek },
  { guid: SNP_CERT_GUID.ask, der: milanAsk },
]);
const debugReport = new Uint8Array(vector('snp/go-sev-guest-debug-report.bin'));
const debugVcek = new Uint8Array(vector('snp/go-sev-guest-debug-vcek.der'));
const AT = new Date('2026-07-01T00:00:00Z');
const SNP_POLICY = ['snp.debug', 'snp.migrate_ma', 'snp.smt', 'snp.vmpl', 'snp.reported_tcb', 'snp.launch_tcb', 'snp.vcek_tcb', 'snp.vcek_hwid'];

describe('AMD VCEK extensions', () => {
  it("read the TCB and hwID of dstack's Milan VCEK", () => {
    const tcb = readAmdCertificateTcb(milanVcek);
    expect({ ...tcb, hwid: Buffer.from(tcb.hwid!).toString('hex').slice(0, 32) }).toEqual({
      productName: 'Milan-B0',
      bootloader: 4,
      tee: 0,
      snp: 23,
      microcode: 213,
      hwid: '38d174589d2dff97a6d40cb9f9d90b95',
    });
  });
});

describe("SEV-SNP platform policy on dstack's Milan report", () => {
  it('passes signature, chain, debug, MIGRATE_MA and the VCEK match; leaves SMT, VMPL and the TCB floor not pinned', () => {
    const { checks } = verifySnpEvidence(milanReport, milanTable, DEFAULT_TRUST_ROOTS, AT);
    expect(failing(checks)).toEqual(['snp.crl']);
    expect(state(checks, SNP_POLICY)).toEqual(['PASS', 'PASS', 'not pinned', 'not pinned', 'not pinned', 'not pinned', 'PASS', 'PASS']);
    expect(detail(checks, 'snp.vcek_tcb')).toBe(
      "the VCEK certificate's TCB extensions (bootloader 4, tee 0, snp 23, microcode 213) equal the report's REPORTED_TCB: the key belongs to the firmware level the report claims",
    );
    expect(detail(checks, 'snp.vcek_hwid')).toBe("the VCEK's hwID equals the report's CHIP_ID 38d174589d2dff97...: the key is this chip's");
    expect(detail(checks, 'snp.reported_tcb')).toBe(
      'REPORTED_TCB is bootloader 4, tee 0, snp 23, microcode 213; no minimum TCB (snp.min_tcb) was given, so old, possibly vulnerable firmware would pass',
    );
  });

  it('fails the reported TCB against a floor above it, while the launch TCB (snp 24) meets it', () => {
    const ref = parseReferenceValues('snp:\n  vmpl: 0\n  min_tcb: { bootloader: 4, snp: 24, microcode: 213 }\n  policy: { smt: true }\n');
    const { checks } = verifySnpEvidence(milanReport, milanTable, DEFAULT_TRUST_ROOTS, AT, ref.snp);
    expect(failing(checks)).toEqual(['snp.crl', 'snp.reported_tcb']);
    expect(detail(checks, 'snp.reported_tcb')).toBe(
      'REPORTED_TCB bootloader 4, tee 0, snp 23, microcode 213 is below the floor (bootloader 4, snp 24, microcode 213): snp 23 < 24; firmware this old lacks fixes the auditor requires',
    );
    expect(state(checks, SNP_POLICY)).toEqual(['PASS', 'PASS', 'PASS', 'PASS', 'FAIL', 'PASS', 'PASS', 'PASS']);
  });

  it('fails VMPL and SMT when pinned to other values', () => {
    const ref = parseReferenceValues('snp:\n  vmpl: [1, 2]\n  policy: { smt: false }\n');
    expect(failing(verifySnpEvidence(milanReport, milanTable, DEFAULT_TRUST_ROOTS, AT, ref.snp).checks)).toEqual(['snp.crl', 'snp.smt', 'snp.vmpl']);
  });

  it("fails the VCEK match, and the signature, when another chip's VCEK is presented", () => {
    const table = buildSnpCertTable([{ guid: SNP_CERT_GUID.vcek, der: debugVcek }]);
    const { checks } = verifySnpEvidence(milanReport, table, DEFAULT_TRUST_ROOTS, AT);
    expect(failing(checks)).toEqual(['snp.report_signature', 'snp.crl', 'snp.vcek_tcb', 'snp.vcek_hwid']);
    expect(detail(checks, 'snp.vcek_tcb')).toBe(
      "the VCEK certificate's TCB extensions differ from REPORTED_TCB (bootloader: certificate 2, report 4; snp: certificate 5, report 23; microcode: certificate 68, report 213): the report is signed with a key of another firmware level",
    );
  });
});

describe("go-sev-guest's real report with DEBUG set", () => {
  it('fails the debug check, and only it', () => {
    const table = buildSnpCertTable([{ guid: SNP_CERT_GUID.vcek, der: debugVcek }]);
    const { checks } = verifySnpEvidence(debugReport, table, DEFAULT_TRUST_ROOTS, AT);
    expect(failing(checks)).toEqual(['snp.crl', 'snp.debug']);
    expect(detail(checks, 'snp.debug')).toBe(
      "guest policy 0xb0000 has DEBUG set: the host can read and change the guest's memory, so nothing in it is confidential",
    );
  });
});

const dstack = JSON.parse(vector('tdx/dstack-quote-and-eventlog.json').toString('utf8')) as { quote: string };
const dstackQuote = new Uint8Array(Buffer.from(dstack.quote, 'hex'));
const sprQuote = new Uint8Array(vector('tdx/spr-e4-quote.bin'));
const TDX_POLICY = [
  'tdx.debug',
  'tdx.td_attributes',
  'tdx.xfam',
  'tdx.mr_config_id',
  'tdx.mr_owner',
  'tdx.mr_owner_config',
  'tdx.mrseam',
  'tdx.tee_tcb_svn',
  'tdx.tcb_status',
];
const DSTACK_CONFIG_ID = '0186b0e55f2fa8e4fb69d890f14f54d5612707646e2573d54e0d2ddaaade77caa9000000000000000000000000000000';

describe('TDX platform policy', () => {
  it("fails dstack's quote on MRCONFIGID, which is not zero and not pinned", () => {
    const { checks } = verifyTdxEvidence(dstackQuote, DEFAULT_TRUST_ROOTS, AT);
    expect(state(checks, TDX_POLICY)).toEqual(['PASS', 'not pinned', 'not pinned', 'FAIL', 'PASS', 'PASS', 'not pinned', 'not pinned', 'not pinned']);
    expect(detail(checks, 'tdx.mr_config_id')).toBe(
      `MRCONFIGID ${DSTACK_CONFIG_ID} is not zero and no reference value pins it: the host gave the TD a configuration identity nobody vouched for; pin it (tdx.mr_config_id) if it is expected`,
    );
    expect(detail(checks, 'tdx.td_attributes')).toBe(
      "TDATTRIBUTES 0000001000000000 (the TD's features (SEPT_VE_DISABLE set)) was compared with nothing: no reference value pins it",
    );
  });

  it("passes dstack's quote with its MRCONFIGID, attributes, XFAM, MRSEAM and TCB floor pinned", () => {
    const ref = parseReferenceValues(`tdx:
  mr_config_id: ${DSTACK_CONFIG_ID}
  td_attributes: '0000001000000000'
  xfam: e702060000000000
  mrseam: d0d80c085166ba78ccc69af268e5753cf0f3394523cb4ff7c50b08d9265c82489c099c377be6a400e4d2b57da924012c
  min_tee_tcb_svn: 0c010400000000000000000000000000
`);
    const { checks } = verifyTdxEvidence(dstackQuote, DEFAULT_TRUST_ROOTS, AT, ref.tdx);
    expect(state(checks, TDX_POLICY)).toEqual(['PASS', 'PASS', 'PASS', 'PASS', 'PASS', 'PASS', 'PASS', 'PASS', 'not pinned']);
  });

  it('fails a TEE_TCB_SVN below the floor, naming the component, and attributes pinned to another value', () => {
    const ref = parseReferenceValues(
      `tdx:\n  td_attributes: '0000000000000000'\n  min_tee_tcb_svn: 0c020400000000000000000000000000\n  mr_config_id: ${DSTACK_CONFIG_ID}\n`,
    );
    const { checks } = verifyTdxEvidence(dstackQuote, DEFAULT_TRUST_ROOTS, AT, ref.tdx);
    expect(failing(checks)).toEqual(['tdx.td_attributes', 'tdx.tee_tcb_svn']);
    expect(detail(checks, 'tdx.tee_tcb_svn')).toBe(
      'TEE_TCB_SVN 0c010400000000000000000000000000 is below the floor 0c020400000000000000000000000000 (component 1: 1 < 2): the TDX module predates fixes the auditor requires',
    );
  });

  it('asks for collateral when the reference pins a TCB status', () => {
    const { checks } = verifyTdxEvidence(
      sprQuote,
      DEFAULT_TRUST_ROOTS,
      new Date('2023-06-01T00:00:00Z'),
      parseReferenceValues('tdx:\n  tcb_status: UpToDate\n').tdx,
    );
    expect(detail(checks, 'tdx.tcb_status')).toBe(
      'not checked: the reference values accept TCB status UpToDate, but no collateral was given (--collateral DIR)',
    );
    expect(state(checks, TDX_POLICY)).toEqual(['PASS', 'not pinned', 'not pinned', 'PASS', 'PASS', 'PASS', 'not pinned', 'not pinned', 'FAIL']);
  });
});

describe("Intel's TCB status", () => {
  const outOfDate = {
    status: 'OutOfDate' as const,
    advisoryIds: ['INTEL-SA-00106', 'INTEL-SA-00477'],
    source: "Intel's TCB info for FMSPC 50806f000000, TCB level of 2018-01-04",
  };

  it('fails anything but UpToDate by default, naming the advisories', () => {
    expect(tcbStatusCheck(outOfDate, undefined)).toEqual({
      name: 'tdx.tcb_status',
      ok: false,
      detail:
        "Intel's TCB info for FMSPC 50806f000000, TCB level of 2018-01-04: status OutOfDate (the platform lacks security updates Intel published), advisories INTEL-SA-00106, INTEL-SA-00477; accepted are UpToDate (the default; pin tdx.tcb_status to accept more)",
    });
  });

  it('passes a status the reference values accept, but never Revoked', () => {
    expect(tcbStatusCheck(outOfDate, ['UpToDate', 'OutOfDate']).ok).toBe(true);
    expect(tcbStatusCheck({ ...outOfDate, status: 'Revoked' }, ['Revoked']).ok).toBe(false);
  });
});
