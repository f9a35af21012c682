/**
 * The SEV-SNP guest policy and PLATFORM_INFO bits the guest checks (snp-guest-checks.ts) report and the reference values
 * (../reference/reference-values.ts) may pin: in a file of their own so neither of those imports the other's module both ways.
 */

/** Guest policy bits beyond DEBUG, MIGRATE_MA and SMT (AMD SEV-SNP ABI, GUEST_POLICY), with what each means when set. */
export const SNP_POLICY_BITS = {
  single_socket: { bit: 20n, set: 'the guest may run on one socket only' },
  cxl_allowed: { bit: 21n, set: 'CXL memory may back the guest' },
  mem_aes_256_xts: { bit: 22n, set: 'memory is encrypted with AES-256-XTS' },
  rapl_disabled: { bit: 23n, set: 'RAPL power reporting (a side channel) must be off' },
  ciphertext_hiding: { bit: 24n, set: 'ciphertext hiding must be on' },
  page_swap_disabled: { bit: 25n, set: "the host may not swap the guest's pages" },
} as const;
export type SnpPolicyBit = keyof typeof SNP_POLICY_BITS;

/** PLATFORM_INFO bits (report offset 0x40): how the machine was configured when the report was made. */
export const SNP_PLATFORM_INFO_BITS = {
  smt_enabled: { bit: 0n, set: 'SMT is on' },
  tsme_enabled: { bit: 1n, set: 'transparent memory encryption (TSME) is on' },
  ecc_enabled: { bit: 2n, set: 'ECC memory is in use' },
  rapl_disabled: { bit: 3n, set: 'RAPL is off' },
  ciphertext_hiding_enabled: { bit: 4n, set: 'ciphertext hiding is on' },
  alias_check_complete: { bit: 5n, set: 'the memory alias check completed' },
} as const;
export type SnpPlatformInfoBit = keyof typeof SNP_PLATFORM_INFO_BITS;
