import type { TrustRoots } from '../trust-roots.ts';
import type { TdxQuote } from '../tdx-quote.ts';
import { checkPckCrl, checkRootCrl, checkTcbSigningChain } from './intel-chains.ts';
import { intelCollateralStage, type CollateralResult, type IntelCollateral } from './intel-collateral-stage.ts';
import { checkQeIdentity, checkTcbInfo } from './intel-signed-collateral.ts';
import { tdxTcbVerdict } from './intel-tcb-level.ts';

export { COLLATERAL_FILES, type CollateralResult, type IntelCollateral } from './intel-collateral-stage.ts';
export { matchTdxTcbLevel } from './intel-tcb-level.ts';

/**
 * Verifies Intel's collateral offline at `at` against the built-in Intel SGX Root CA, and from it Intel's verdict on
 * the quote's platform, in go-tdx-guest's order: the chains and CRLs (the root CRL, the TCB signing chain), the signed
 * collateral (the TCB info: signature, validity, FMSPC from the PCK certificate, TDX module identity; the QE identity:
 * signature, validity, the QE report against it), the PCK CRL (signature, validity, the PCK certificate not revoked),
 * then the TCB level for the PCK's and the quote's SVNs. Each step is a file of its own and reads the stage the steps
 * before it left.
 */
export async function verifyIntelCollateral(quote: TdxQuote, c: IntelCollateral, roots: TrustRoots, at: Date): Promise<CollateralResult> {
  const stage = intelCollateralStage(quote, c, roots, at);
  await checkRootCrl(stage);
  checkTcbSigningChain(stage);
  checkTcbInfo(stage);
  checkQeIdentity(stage);
  await checkPckCrl(stage);
  return { checks: stage.checks, verdict: tdxTcbVerdict(stage) };
}
