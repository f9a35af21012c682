import { ARK_GENOA, ASK_GENOA, ASVK_GENOA } from './roots/amd-genoa.ts';
import { ARK_MILAN, ASK_MILAN, ASVK_MILAN } from './roots/amd-milan.ts';
import { ARK_TURIN, ASK_TURIN, ASVK_TURIN } from './roots/amd-turin.ts';
import { INTEL_SGX_ROOT_CA } from './roots/intel-sgx-root-ca.ts';

/** The certificates a verifier trusts, PEM. Tests pass their own; everyone else gets DEFAULT_TRUST_ROOTS. */
export interface TrustRoots {
  /** AMD root keys (ARK): an SNP report is trusted only if its chain ends at one of these, byte for byte. */
  amdArks: readonly string[];
  /**
   * AMD signing keys (ASK, ASVK) used when the evidence's certificate table carries none. They add no trust of
   * their own: each must still be signed by one of `amdArks`.
   */
  amdIntermediates: readonly string[];
  /** Intel SGX Root CA: a TDX quote's PCK chain must end at one of these. */
  intelRoots: readonly string[];
}

export const DEFAULT_TRUST_ROOTS: TrustRoots = {
  amdArks: [ARK_MILAN, ARK_GENOA, ARK_TURIN],
  amdIntermediates: [ASK_MILAN, ASK_GENOA, ASK_TURIN, ASVK_MILAN, ASVK_GENOA, ASVK_TURIN],
  intelRoots: [INTEL_SGX_ROOT_CA],
};
