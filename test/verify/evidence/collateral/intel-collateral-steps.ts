import { readFileSync } from 'node:fs';
import type { Check } from '../../../../src/verify/check.ts';
import { intelCollateralStage, type IntelCollateral, type IntelCollateralStage } from '../../../../src/verify/evidence/collateral/intel-collateral-stage.ts';
import { readTdxQuote } from '../../../../src/verify/evidence/tdx-quote.ts';
import { DEFAULT_TRUST_ROOTS } from '../../../../src/verify/evidence/trust-roots.ts';

/** Intel's real collateral for the Sapphire Rapids quote of test/vectors/tdx, for the steps' own tests. */
const dir = new URL('../../../vectors/tdx/', import.meta.url);
const vector = (name: string) => readFileSync(new URL(name, dir));
export const quote = readTdxQuote(new Uint8Array(vector('spr-e4-quote.bin')));
export const collateral = (): IntelCollateral => ({
  tcbInfo: vector('intel-tcbinfo-response.json').toString('utf8'),
  qeIdentity: vector('intel-qeidentity-response.json').toString('utf8'),
  tcbSigningChain: vector('intel-tcb-signing-chain.pem').toString('utf8'),
  pckCrl: new Uint8Array(vector('intel-pck-crl.der')),
  pckCrlIssuerChain: vector('intel-pck-crl-issuer-chain.pem').toString('utf8'),
  rootCrl: new Uint8Array(vector('intel-root-crl.der')),
});
/** Inside every validity window of the sample collateral. */
export const IN_2023 = new Date('2023-06-20T00:00:00Z');
export const stageAt = (at: Date, c: IntelCollateral = collateral()): IntelCollateralStage => intelCollateralStage(quote, c, DEFAULT_TRUST_ROOTS, at);
export const verdicts = (checks: Check[]) => checks.map((c) => [c.name, c.ok, c.detail]);
