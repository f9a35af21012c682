import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { verifyIntelCollateral } from '../../../src/verify/evidence/collateral/intel-collateral.ts';
import { readDcapQvlCollateral } from '../../../src/verify/evidence/collateral/bundle.ts';
import { tdxModuleCheck, type TdxModuleTcbInfo } from '../../../src/verify/evidence/collateral/tdx-module.ts';
import { readTdxQuote } from '../../../src/verify/evidence/tdx-quote.ts';
import { DEFAULT_TRUST_ROOTS } from '../../../src/verify/evidence/trust-roots.ts';

const v = (path: string) => new URL(`../../vectors/tdx/${path}`, import.meta.url);
// dcap-qvl's real quote v4 (TEE_TCB_SVN 06 01 03 ...: module version 1, ISVSVN 6) and Intel's collateral for it (2025-06-19 to 07-19).
const AT = new Date('2025-06-25T00:00:00Z');
const quoteBytes = readFileSync(v('dcap-qvl-quote.bin'));
const collateralText = readFileSync(v('dcap-qvl-collateral.json'), 'utf8');
const tcbInfo = JSON.parse((JSON.parse(collateralText) as { tcb_info: string }).tcb_info) as TdxModuleTcbInfo;
const body = readTdxQuote(new Uint8Array(quoteBytes)).body;
/** MRSIGNERSEAM's offset in the quote: header (48) + TEE_TCB_SVN (16) + MRSEAM (48). */
const MRSIGNERSEAM_AT = 48 + 16 + 48;

describe("the TDX module's identity and TCB status from Intel's tdxModuleIdentities", () => {
  it("a real quote's module matches TDX_01 and Intel rates its ISVSVN 6 UpToDate", async () => {
    const { checks, verdict } = await verifyIntelCollateral(
      readTdxQuote(new Uint8Array(quoteBytes)),
      readDcapQvlCollateral(collateralText),
      DEFAULT_TRUST_ROOTS,
      AT,
    );
    expect(checks.find((c) => c.name === 'tdx.module_identity')).toEqual({
      name: 'tdx.module_identity',
      ok: true,
      detail:
        "MRSIGNERSEAM and SEAMATTRIBUTES match Intel's identity for TDX module TDX_01: the TDX module is Intel's; Intel rates its ISVSVN 6 UpToDate (level of 2024-03-13, no advisories), which tdx.tcb_status takes into account",
    });
    expect(verdict.status).toBe('UpToDate');
  });

  it('a changed MRSIGNERSEAM fails tdx.module_identity (and the quote signature)', async () => {
    const tampered = Buffer.from(quoteBytes);
    tampered[MRSIGNERSEAM_AT]! ^= 0x01;
    const { checks } = await verifyIntelCollateral(readTdxQuote(new Uint8Array(tampered)), readDcapQvlCollateral(collateralText), DEFAULT_TRUST_ROOTS, AT);
    const check = checks.find((c) => c.name === 'tdx.module_identity');
    expect(check?.ok).toBe(false);
    expect(check?.detail).toBe(
      `MRSIGNERSEAM 01${'00'.repeat(47)} is not the signer Intel lists for TDX module TDX_01 (${'00'.repeat(48)}): the module isolating the TD is not one Intel signed`,
    );
  });

  it('a module at ISVSVN 2 is OutOfDate by the same real TCB info, and the verdict takes the worse status with the advisories', () => {
    const old = { ...body, teeTcbSvn: Uint8Array.from([2, 1, 3, ...new Array<number>(13).fill(0)]) };
    expect(tdxModuleCheck(tcbInfo, old).status).toEqual({ status: 'OutOfDate', advisoryIds: [], source: 'TDX module TDX_01, ISVSVN 2, level of 2023-08-09' });
    const withAdvisory = structuredClone(tcbInfo);
    withAdvisory.tdxModuleIdentities![1]!.tcbLevels[1]!.advisoryIDs = ['INTEL-SA-00999'];
    const result = tdxModuleCheck(withAdvisory, old);
    expect(result.check.detail).toContain('Intel rates its ISVSVN 2 OutOfDate (level of 2023-08-09, advisories INTEL-SA-00999)');
  });

  it('a module version Intel does not list, or an ISVSVN below every level, fails', () => {
    const unknown = tdxModuleCheck(tcbInfo, { ...body, teeTcbSvn: Uint8Array.from([6, 2, ...new Array<number>(14).fill(0)]) });
    expect(unknown.check).toMatchObject({
      ok: false,
      detail: "TEE_TCB_SVN names TDX module version 2, but Intel's TCB info lists no TDX_02 (only TDX_03, TDX_01): a module Intel does not know",
    });
    const ancient = tdxModuleCheck(tcbInfo, { ...body, teeTcbSvn: Uint8Array.from([1, 1, ...new Array<number>(14).fill(0)]) });
    expect(ancient.check.ok).toBe(false);
    expect(ancient.check.detail).toContain('ISVSVN 1 is below every TCB level Intel lists for it (lowest 2)');
  });

  it('SEAMATTRIBUTES with a bit outside the mask fail, and a TCB info without tdxModule fails', () => {
    const masked = structuredClone(tcbInfo);
    masked.tdxModuleIdentities![1]!.attributesMask = 'FEFFFFFFFFFFFFFF';
    expect(tdxModuleCheck(masked, { ...body, seamAttributes: Uint8Array.from([1, 0, 0, 0, 0, 0, 0, 0]) }).check.detail).toContain('set bits outside the mask');
    expect(tdxModuleCheck({}, body).check).toMatchObject({ ok: false });
  });
});
