import { describe, expect, it } from 'vitest';
import { checkTcbSigningChain } from '../../../../src/verify/evidence/collateral/intel-chains.ts';
import type { IntelCollateralStage } from '../../../../src/verify/evidence/collateral/intel-collateral-stage.ts';
import { checkTcbInfo } from '../../../../src/verify/evidence/collateral/intel-signed-collateral.ts';
import { tdxTcbVerdict } from '../../../../src/verify/evidence/collateral/intel-tcb-level.ts';
import { IN_2023, quote, stageAt } from './intel-collateral-steps.ts';

/** The stage with trusted TCB info, for a platform at the SVNs given (the sample quote's are below every level). */
function trustedAt(compSvn: number[], teeTcbSvn: number[]): IntelCollateralStage {
  const stage = stageAt(IN_2023);
  checkTcbSigningChain(stage);
  checkTcbInfo(stage);
  return { ...stage, pckExt: { ...stage.pckExt!, compSvn, pceSvn: 11 }, quote: { ...quote, body: { ...quote.body, teeTcbSvn: Uint8Array.from(teeTcbSvn) } } };
}
const COMPONENTS = [5, 5, 2, 2, 3, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0];
const TEE_TCB_SVN = [3, 0, 5, ...new Array<number>(13).fill(0)];

describe("Intel's TCB level matching as the collateral check's last step", () => {
  it('gives no status without trusted TCB info', () => {
    expect(tdxTcbVerdict(stageAt(IN_2023))).toEqual({ status: null, advisoryIds: [], source: 'no trusted TCB info for this platform' });
  });

  it("gives the level's status for a platform that meets it, converged with an out-of-date Quoting Enclave's", () => {
    const stage = trustedAt(COMPONENTS, TEE_TCB_SVN);
    expect(tdxTcbVerdict(stage)).toMatchObject({ status: 'UpToDate', source: "Intel's TCB info for FMSPC 50806f000000, TCB level of 2023-02-15" });
    stage.qe = { status: 'OutOfDate', advisoryIds: ['INTEL-SA-00000'] };
    expect(tdxTcbVerdict(stage)).toMatchObject({
      status: 'OutOfDate',
      advisoryIds: ['INTEL-SA-00000'],
      source: "Intel's TCB info for FMSPC 50806f000000, TCB level of 2023-02-15 (platform UpToDate, Quoting Enclave OutOfDate)",
    });
  });
});
