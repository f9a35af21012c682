/**
 * AMD's collateral for one SEV-SNP report, as AMD's Key Distribution Service serves it (kdsintf.amd.com, AMD
 * pub. 57230): the VCEK for the chip and TCB (or nothing for a VLEK, which the host provisions), the product's
 * cert_chain (ASK or ASVK, then ARK) and its CRL. Each is optional so that a missing one is reported by name.
 */
export interface AmdCollateral {
  /** amd-vcek.der: the VCEK (DER) from /vcek/v1/{product}/{chip id}?blSPL=..&teeSPL=..&snpSPL=..&ucodeSPL=... */
  vcek?: Uint8Array;
  /** amd-cert-chain.pem: /vcek/v1/{product}/cert_chain (ASK, ARK) or /vlek/v1/{product}/cert_chain (ASVK, ARK). */
  certChain?: string;
  /** amd-crl.der: /vcek/v1/{product}/crl or /vlek/v1/{product}/crl, signed by the ARK. */
  crl?: Uint8Array;
}

/** The file names of AMD collateral in a bundle directory (`--collateral DIR`), beside Intel's. */
export const AMD_COLLATERAL_FILES: Record<keyof AmdCollateral, string> = {
  vcek: 'amd-vcek.der',
  certChain: 'amd-cert-chain.pem',
  crl: 'amd-crl.der',
};
