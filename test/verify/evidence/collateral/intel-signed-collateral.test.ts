import { describe, expect, it } from 'vitest';
import { checkTcbSigningChain } from '../../../../src/verify/evidence/collateral/intel-chains.ts';
import { checkQeIdentity, checkTcbInfo } from '../../../../src/verify/evidence/collateral/intel-signed-collateral.ts';
import { collateral, IN_2023, stageAt, verdicts } from './intel-collateral-steps.ts';

describe("Intel's signed TCB info and QE identity", () => {
  it('are not checked, and say so, without a trusted TCB signing certificate', () => {
    const stage = stageAt(IN_2023);
    checkTcbInfo(stage);
    checkQeIdentity(stage);
    expect(verdicts(stage.checks)).toEqual([
      ['collateral.tcb_info', false, 'not checked: no trusted TCB signing certificate'],
      ['collateral.qe_identity', false, 'not checked: no trusted TCB signing certificate'],
    ]);
    expect([stage.tcbInfo, stage.qe]).toEqual([undefined, undefined]);
  });

  it("leave the TCB info and the Quoting Enclave's status for the TCB level once signed, current and about this platform", () => {
    const stage = stageAt(IN_2023);
    checkTcbSigningChain(stage);
    checkTcbInfo(stage);
    checkQeIdentity(stage);
    expect(stage.checks.map((c) => [c.name, c.ok])).toEqual([
      ['collateral.tcb_signing_chain', true],
      ['collateral.tcb_info', true],
      ['tdx.module_identity', true],
      ['collateral.qe_identity', true],
    ]);
    expect([stage.tcbInfo?.fmspc, stage.tcbInfo?.tcbLevels.length, stage.qe?.status]).toEqual(['50806f000000', 2, 'UpToDate']);
  });

  it("refuses a QE identity for another enclave: Intel's signature over it no longer holds", () => {
    const c = collateral();
    const stage = stageAt(IN_2023, { ...c, qeIdentity: c.qeIdentity!.replace('"id":"TD_QE"', '"id":"QE"') });
    checkTcbSigningChain(stage);
    checkQeIdentity(stage);
    expect(verdicts(stage.checks)[1]).toEqual([
      'collateral.qe_identity',
      false,
      'the QE identity signature does not verify with the Intel SGX TCB Signing key: it was changed or forged',
    ]);
  });
});
