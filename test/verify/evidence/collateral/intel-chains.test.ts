import { describe, expect, it } from 'vitest';
import { checkPckCrl, checkRootCrl, checkTcbSigningChain } from '../../../../src/verify/evidence/collateral/intel-chains.ts';
import { collateral, IN_2023, stageAt, verdicts } from './intel-collateral-steps.ts';

describe("the chains and CRLs of Intel's collateral", () => {
  it('the root CRL: trusted when a built-in root signed it and it is current, and kept for the steps after', async () => {
    const stage = stageAt(IN_2023);
    await checkRootCrl(stage);
    expect(stage.rootCrl?.issuer).toBe('CN=Intel SGX Root CA, O=Intel Corporation, L=Santa Clara, ST=CA, C=US');
    expect(stage.checks.map((c) => [c.name, c.ok])).toEqual([['collateral.root_crl', true]]);
    const later = stageAt(new Date('2026-11-24T00:00:00Z'));
    await checkRootCrl(later);
    expect([later.rootCrl, later.checks[0]?.ok]).toEqual([undefined, false]);
  });

  it('the TCB signing chain: says "not revoked" only when a trusted root CRL was read before it', async () => {
    const alone = stageAt(IN_2023);
    checkTcbSigningChain(alone);
    expect(verdicts(alone.checks)).toEqual([
      [
        'collateral.tcb_signing_chain',
        true,
        'Intel SGX TCB Signing <- Intel SGX Root CA (built in), valid at 2023-06-20T00:00:00.000Z (until 2025-05-21T10:50:10.000Z)',
      ],
    ]);
    expect(alone.signing?.subject).toContain('CN=Intel SGX TCB Signing');
    const afterRootCrl = stageAt(IN_2023);
    await checkRootCrl(afterRootCrl);
    checkTcbSigningChain(afterRootCrl);
    expect(afterRootCrl.checks[1]?.detail).toBe(
      'Intel SGX TCB Signing <- Intel SGX Root CA (built in), valid at 2023-06-20T00:00:00.000Z (until 2025-05-21T10:50:10.000Z), not revoked',
    );
  });

  it("the PCK CRL: refused when its issuer chain is another CA's, whose key did not sign it", async () => {
    const c = collateral();
    const stage = stageAt(IN_2023, { ...c, pckCrlIssuerChain: c.tcbSigningChain! });
    await checkPckCrl(stage);
    expect(verdicts(stage.checks)).toEqual([['collateral.pck_crl', false, 'the PCK CRL is not signed by Intel SGX TCB Signing']]);
  });
});
