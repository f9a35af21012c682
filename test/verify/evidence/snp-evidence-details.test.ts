/**
 * Details of SEV-SNP evidence that a cross-check against Tinfoil's verifier found reported for the wrong reason, each on
 * real evidence (test/vectors/snp) or evidence derived from it: an expired VCEK or VLEK, a CHIP_ID the host masked, a
 * report MASK_CHIP_KEY left unsigned, and bytes after the signed region that are not zero.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifySnpEvidence } from '../../../src/verify/evidence/snp-verify.ts';
import { runVerifyEvidence } from '../../support/cli.ts';
import { amdCertTable, createAmdTestChain, resignSnpReport, type AmdTestChain } from '../../support/evidence-fixtures.ts';

const v = (path: string) => new URL(`../../vectors/snp/${path}`, import.meta.url).pathname;
const work = mkdtempSync(join(tmpdir(), 'sigil-snp-details-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const file = (name: string, bytes: Uint8Array) => {
  writeFileSync(join(work, name), bytes);
  return join(work, name);
};
const detailOf = (stdout: string, name: string) =>
  new RegExp(`^(PASS|FAIL|----|WAIVED) ${name.replace(/[.[\]]/g, '\\$&')} — (.*)$`, 'm').exec(stdout)?.slice(1);

// dstack's Milan attestation (real evidence): the 1184-byte report starts at byte 4; its VCEK is valid 2026-06-17 to 2033-06-17.
const milanReport = () => Buffer.from(readFileSync(v('dstack-milan-attestation.bin')).subarray(4, 4 + 1184));
const MILAN_AT = new Date('2026-07-01T00:00:00Z');
const milanFlags = ['--vcek', v('dstack-milan-vcek.pem'), '--ask', v('dstack-milan-ask.pem')];

describe('an expired VCEK or VLEK is reported as expired', () => {
  it("a real Milan VLEK past 2025-12-10, chained through the built-in ASVK: expired, not 'no built-in AMD signing key issued the VLEK'", async () => {
    const r = await runVerifyEvidence(
      ['--snp-report', v('trustee-milan-vlek-report.bin'), '--vcek', v('trustee-milan-vlek.der')],
      new Date('2026-01-01T00:00:00Z'),
    );
    expect(detailOf(r.stdout, 'snp.vcek_chain')).toEqual([
      'FAIL',
      "the VLEK (SEV-VLEK, issued by SEV-VLEK-Milan) expired at 2025-12-10T22:14:21.000Z (now 2026-01-01T00:00:00.000Z): a report signed by it is no longer vouched for by AMD; fetch a current VLEK from AMD's KDS",
    ]);
    expect(r.marks['snp.report_signature']).toBe('PASS');
  });

  it('a real Genoa VCEK past 2032-06-11, chained through the built-in ASK: expired', async () => {
    const r = await runVerifyEvidence(
      ['--snp-report', v('openpcc-azure-genoa-report.bin'), '--vcek', v('openpcc-genoa-vcek.pem')],
      new Date('2033-01-01T00:00:00Z'),
    );
    expect(detailOf(r.stdout, 'snp.vcek_chain')?.[1]).toMatch(
      /^the VCEK \(SEV-VCEK, issued by SEV-Genoa\) expired at 2032-06-11T12:07:37\.000Z \(now 2033-01-01T00:00:00\.000Z\): /,
    );
  });

  it('a real Milan VCEK past 2033-06-17 with the ASK given: expired', async () => {
    const r = await runVerifyEvidence(['--snp-report', file('milan.bin', milanReport()), ...milanFlags], new Date('2034-01-01T00:00:00Z'));
    expect(detailOf(r.stdout, 'snp.vcek_chain')?.[1]).toMatch(
      /^the VCEK \(SEV-VCEK, issued by SEV-Milan\) expired at 2033-06-17T01:05:04\.000Z \(now 2034-01-01T00:00:00\.000Z\): /,
    );
  });
});

describe('bytes outside the signed region', () => {
  it('passes the real report, whose unsigned bytes are zero', async () => {
    const r = await runVerifyEvidence(['--snp-report', file('milan-real.bin', milanReport()), ...milanFlags], MILAN_AT);
    expect(r.marks).toMatchObject({ 'snp.report': 'PASS', 'snp.report_signature': 'PASS' });
  });

  it('refuses a report whose signature padding or reserved tail was changed: the signature still verifies, so nothing else would notice', async () => {
    const padded = milanReport();
    padded[0x2a0 + 50] = 0x01; // inside R's 24 bytes of padding
    padded[0x400] = 0x5a; // the reserved bytes after S
    const r = await runVerifyEvidence(['--snp-report', file('milan-padded.bin', padded), ...milanFlags], MILAN_AT);
    expect(r.marks['snp.report_signature']).toBe('PASS');
    expect(detailOf(r.stdout, 'snp.report')).toEqual([
      'FAIL',
      'SEV-SNP report version 3, VMPL 0, guest SVN 0, signed by VCEK, chip ' +
        milanReport().subarray(0x1a0, 0x1a8).toString('hex') +
        "...; but bytes 0x2D0-0x2E7 (the padding of R), 0x330-0x49F (the reserved bytes after the signature) are not zero: they lie outside the signed part of the report (0x000-0x29F), AMD's firmware leaves them zero, and nobody signed what is there, so the report is refused as altered",
    ]);
    expect(r.code).toBe(1);
  });
});

describe('a masked CHIP_ID and MASK_CHIP_KEY', () => {
  let chain: AmdTestChain;
  beforeAll(async () => {
    chain = await createAmdTestChain('Milan');
  });

  it("a report with MASK_CHIP_KEY set is unsigned (zeros where the signature goes): refused for that, not as a bad signature or another chip's key", async () => {
    const masked = milanReport();
    masked.writeUInt32LE(masked.readUInt32LE(0x48) | 0b10, 0x48);
    masked.fill(0, 0x1a0, 0x1e0);
    masked.fill(0, 0x2a0, 0x4a0);
    const r = await runVerifyEvidence(['--snp-report', file('milan-mask-chip-key.bin', masked), ...milanFlags], MILAN_AT);
    expect(detailOf(r.stdout, 'snp.report_signature')).toEqual([
      'FAIL',
      "the report is unsigned: MASK_CHIP_KEY is set, so the host configured AMD's firmware (SNP_CONFIG) not to sign reports with the chip's key, and the signature is all zeros; nothing shows AMD hardware made this report",
    ]);
    expect(detailOf(r.stdout, 'snp.vcek_hwid')?.[0]).toBe('PASS');
    expect(r.marks['snp.report']).toBe('PASS');
  });

  it('a signed report whose CHIP_ID the host masked (derived from the real one, re-signed by a test VCEK): the key still binds the chip; an allow-list by CHIP_ID says why it cannot match', () => {
    const zeroed = milanReport();
    zeroed.fill(0, 0x1a0, 0x1e0);
    const report = resignSnpReport(zeroed, chain.vcekKey);
    const { checks } = verifySnpEvidence(report, amdCertTable(chain), chain.roots, new Date('2025-01-01T00:00:00Z'), { chip_id: ['c1'.repeat(64)] });
    const byName = Object.fromEntries(checks.map((c) => [c.name, c]));
    expect(byName['snp.report_signature']!.ok).toBe(true);
    expect(byName['snp.vcek_hwid']).toEqual({
      name: 'snp.vcek_hwid',
      ok: true,
      detail:
        "CHIP_ID is all zeros: the host masked it (MASK_CHIP_ID), so there is nothing to compare with the VCEK's hwID c1c1c1c1c1c1c1c1...; the VCEK's signature on the report (snp.report_signature) is what ties the report to the chip holding that key",
    });
    expect(byName['snp.instance']!.ok).toBe(false);
    expect(byName['snp.instance']!.detail).toMatch(
      /^CHIP_ID is all zeros \(the host masked it\), so the machine cannot be matched with the 1 allowed machine\(s\) by CHIP_ID/,
    );
  });
});
