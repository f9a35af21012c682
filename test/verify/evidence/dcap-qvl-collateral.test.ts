import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runVerifyEvidence } from '../../support/cli.ts';

const v = (path: string) => new URL(`../../vectors/tdx/${path}`, import.meta.url).pathname;
const work = mkdtempSync(join(tmpdir(), 'sigil-dcap-qvl-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
// The collateral was issued 2025-06-19 and is good until 2025-07-19.
const AT = new Date('2025-06-25T00:00:00Z');
const QUOTE = v('dcap-qvl-quote.bin');
const COLLATERAL = v('dcap-qvl-collateral.json');
const COLLATERAL_CHECKS = ['collateral.root_crl', 'collateral.tcb_signing_chain', 'collateral.tcb_info', 'collateral.qe_identity', 'collateral.pck_crl'];

describe("dcap-qvl's JSON collateral, given directly as --collateral FILE", () => {
  it('verifies every piece of Intel collateral and decides the TCB status', async () => {
    const r = await runVerifyEvidence(['--tdx-quote', QUOTE, '--collateral', COLLATERAL], AT);
    expect(r.stderr).toBe('');
    expect(COLLATERAL_CHECKS.map((n) => [n, r.marks[n]])).toEqual(COLLATERAL_CHECKS.map((n) => [n, 'PASS']));
    expect(r.stdout).toContain(
      "\nPASS tdx.tcb_status — Intel's TCB info for FMSPC B0C06F000000, TCB level of 2024-03-13: status UpToDate (the platform has every security update Intel published), no advisories; accepted (the default accepts only UpToDate)\n",
    );
    // Every collateral check and the TCB status pass, but nothing pinned (no reference values, no REPORT_DATA, no log): fail closed, exit 1, no FAIL.
    expect(Object.values(r.marks)).not.toContain('FAIL');
    expect(r.stdout.trimEnd().split('\n').at(-1)).toBe(
      'NOT VERIFIED: 17 checks passed; 14 not pinned, so compared with nothing (tdx.qe, tdx.instance, tdx.td_attributes, tdx.xfam, tdx.mrseam, tdx.tee_tcb_svn, evidence.report_data, reference.values, reference.mrtd, reference.rtmr0, reference.rtmr1, reference.rtmr2, reference.rtmr3, eventlog.replay); the code was not compared with reference values',
    );
    expect(r.code).toBe(1);
  });

  it('fails collateral.tcb_info when one byte of the signed TCB info changes', async () => {
    const doc = JSON.parse(readFileSync(COLLATERAL, 'utf8')) as { tcb_info: string };
    doc.tcb_info = doc.tcb_info.replace('"version":3', '"version":4');
    const path = join(work, 'tampered.json');
    writeFileSync(path, JSON.stringify(doc));
    const r = await runVerifyEvidence(['--tdx-quote', QUOTE, '--collateral', path], AT);
    expect(r.marks).toMatchObject({ 'collateral.tcb_info': 'FAIL', 'collateral.qe_identity': 'PASS', 'collateral.pck_crl': 'PASS' });
  });

  it('applies a minimum TCB evaluation (tcbEvaluationDataNumber): 17 passes, 18 fails tdx.tcb_status', async () => {
    const ref = (n: number) => {
      const path = join(work, `eval-${n}.yaml`);
      writeFileSync(path, `tdx:\n  min_tcb_evaluation_data_number: ${n}\n`);
      return path;
    };
    const ok = await runVerifyEvidence(['--tdx-quote', QUOTE, '--collateral', COLLATERAL, '--reference', ref(17)], AT);
    expect(ok.stdout).toMatch(/\nPASS tdx\.tcb_status — .*; TCB evaluation 17 is at or above the minimum 17\n/);
    const newer = await runVerifyEvidence(['--tdx-quote', QUOTE, '--collateral', COLLATERAL, '--reference', ref(18)], AT);
    expect(newer.stdout).toContain(
      "\nFAIL tdx.tcb_status — Intel's TCB info for FMSPC B0C06F000000, TCB level of 2024-03-13: the collateral is of TCB evaluation 17, older than the minimum 18 (tdx.min_tcb_evaluation_data_number): it predates TCB recoveries the auditor requires\n",
    );
    const none = await runVerifyEvidence(['--tdx-quote', QUOTE, '--reference', ref(17)], AT);
    expect(none.marks['tdx.tcb_status']).toBe('FAIL');
  });

  it('refuses a JSON file that is not dcap-qvl collateral, naming the missing field', async () => {
    const path = join(work, 'other.json');
    writeFileSync(path, '{"tcb_info": "{}"}');
    const r = await runVerifyEvidence(['--tdx-quote', QUOTE, '--collateral', path], AT);
    expect(r.code).toBe(3);
    expect(r.stderr).toBe(
      `sigil verify-evidence: could not verify: cannot read the collateral bundle ${path}: dcap-qvl collateral lacks tcb_info_signature (a string)\n`,
    );
  });
});
