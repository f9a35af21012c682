import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Check } from '../../../src/verify/check.ts';
import { DEFAULT_TRUST_ROOTS } from '../../../src/verify/evidence/trust-roots.ts';
import { verifySnpEvidence } from '../../../src/verify/evidence/snp-verify.ts';
import { encodeSnpCertTable, SNP_CERT_GUID } from '../../../src/verify/evidence/snp-cert-table.ts';
import { parseReferenceValues, type SnpReferenceValues } from '../../../src/verify/reference/reference-values.ts';
import { amdCertTable, buildSnpReport, createAmdTestChain, type AmdTestChain } from '../../support/evidence-fixtures.ts';
import { X509Certificate } from 'node:crypto';

const v = (path: string) => new URL(`../../vectors/snp/${path}`, import.meta.url);
// Azure's real Genoa report, version 3, with its VCEK (valid from 2025-06-11); REPORT_ID_MA is all ones.
const AT = new Date('2025-07-01T00:00:00Z');
const azureReport = new Uint8Array(readFileSync(v('openpcc-azure-genoa-report.bin')));
const azureTable = encodeSnpCertTable([{ guid: SNP_CERT_GUID.vcek, der: new Uint8Array(new X509Certificate(readFileSync(v('openpcc-genoa-vcek.pem'))).raw) }]);
const check = (checks: Check[], name: string) => checks.find((c) => c.name === name);
const azure = (ref?: SnpReferenceValues) => verifySnpEvidence(azureReport, azureTable, DEFAULT_TRUST_ROOTS, AT, ref).checks;

describe('SEV-SNP mitigation vectors (report version 5)', () => {
  it('a real version 3 report says honestly that it has none: NOT PINNED when none is required, FAIL when bits are', () => {
    expect(check(azure(), 'snp.mitigation_vector')).toEqual({
      name: 'snp.mitigation_vector',
      ok: true,
      pinned: false,
      detail:
        'report version 3 carries no mitigation vectors (version 5 adds LAUNCH_MIT_VECTOR and CURRENT_MIT_VECTOR); none is required (snp.min_launch_mit_vector, snp.min_current_mit_vector)',
    });
    expect(check(azure({ min_current_mit_vector: 1n }), 'snp.mitigation_vector')).toMatchObject({
      ok: false,
      detail: expect.stringContaining('not checked: report version 3 carries no mitigation vectors') as string,
    });
  });

  describe('on a version 5 report (test chain)', () => {
    let chain: AmdTestChain;
    beforeAll(async () => {
      chain = await createAmdTestChain();
    });
    const v5 = (ref: SnpReferenceValues | undefined) =>
      check(
        verifySnpEvidence(
          buildSnpReport(
            { reportData: new Uint8Array(64), measurement: new Uint8Array(48), mitigationVectors: { launch: 0b0101n, current: 0b0111n } },
            chain.vcekKey,
          ),
          amdCertTable(chain),
          chain.roots,
          AT,
          ref,
        ).checks,
        'snp.mitigation_vector',
      );

    it('reads both vectors and leaves them NOT PINNED when nothing is required', () => {
      expect(v5(undefined)).toMatchObject({
        ok: true,
        pinned: false,
        detail:
          'LAUNCH_MIT_VECTOR 0x5, CURRENT_MIT_VECTOR 0x7 were compared with nothing: no required mitigation bits (snp.min_launch_mit_vector, snp.min_current_mit_vector) were given',
      });
    });

    it('passes when every required bit is set and names the missing bits otherwise', () => {
      expect(v5(parseReferenceValues('snp: {min_launch_mit_vector: "0x5", min_current_mit_vector: 6}').snp)).toMatchObject({
        ok: true,
        detail: 'LAUNCH_MIT_VECTOR 0x5, CURRENT_MIT_VECTOR 0x7: every required mitigation bit is set',
      });
      expect(v5({ min_launch_mit_vector: 0b0011n })).toEqual({
        name: 'snp.mitigation_vector',
        ok: false,
        detail:
          'LAUNCH_MIT_VECTOR 0x5, CURRENT_MIT_VECTOR 0x7: LAUNCH_MIT_VECTOR lacks bits 0x2 of the required 0x3: the firmware does not apply mitigations the auditor requires',
      });
    });

    it('refuses a vector that is not a 64-bit number', () => {
      expect(() => parseReferenceValues('snp: {min_current_mit_vector: "0x1ffffffffffffffff"}')).toThrow('snp.min_current_mit_vector: must be a 64-bit number');
    });
  });
});

describe('REPORT_ID_MA (the migration agent)', () => {
  it('unpinned, the real report says in words that all ones means no migration agent', () => {
    expect(check(azure(), 'snp.instance')?.detail).toContain('(REPORT_ID_MA is all ones: no migration agent is bound to this guest)');
  });

  it('pinned to all ones it passes; pinned to an agent it fails', () => {
    expect(check(azure({ report_id_ma: ['ff'.repeat(32)] }), 'snp.instance')).toMatchObject({
      ok: true,
      detail:
        'REPORT_ID_MA as pinned (REPORT_ID_MA is all ones: no migration agent is bound to this guest): this is one of the machines and guests the auditor named',
    });
    expect(check(azure({ report_id_ma: ['ab'.repeat(32)] }), 'snp.instance')).toEqual({
      name: 'snp.instance',
      ok: false,
      detail: 'REPORT_ID_MA is all ones: no migration agent is bound to this guest, which is not the pinned migration agent: the report comes from elsewhere',
    });
  });
});
