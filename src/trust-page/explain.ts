/**
 * What each check means to someone who is not a specialist: a title, and why it matters. The detail
 * line of the check itself says what was compared; this says why anyone should care.
 */
export interface Explanation {
  title: string;
  why: string;
}

const EXPLANATIONS: Array<[prefix: string, explanation: Explanation]> = [
  ['page.fetch', { title: 'The service answered', why: 'Everything below is checked on what the service sent to this page.' }],
  ['binding.version', { title: 'Attestation format', why: 'The page reads the version 2 attestation document; another version cannot be checked here.' }],
  ['binding.nonce', { title: 'Fresh evidence', why: 'The page sent a random number; evidence that repeats it was made now, not replayed from the past.' }],
  ['binding.jwks', { title: 'Receipt keys are the attested ones', why: 'Receipts are signed with these keys, so a receipt proves the attested service made it.' }],
  ['binding.report_data', { title: 'The evidence vouches for these keys', why: 'The hardware report carries a hash of the keys, the policy and this page\'s random number, so none of them can be swapped.' }],
  ['binding.policy', { title: 'The published policy is the attested one', why: 'The policy lists the models and their hashes and promises that prompts are never logged; the hardware report commits to it.' }],
  ['binding.hpke', { title: 'The encryption key is the attested one', why: 'Chat messages from this page are encrypted to this key, which only the attested enclave holds.' }],
  ['binding.tls', { title: 'TLS key', why: 'Browsers do not show a page the server\'s TLS key, so the page relies on encrypting to the attested key instead; `sigil verify` and the attested client pin the TLS key.' }],
  ['binding.gpu', { title: 'GPU evidence', why: 'The GPUs\' own signed reports show they run in confidential-computing mode.' }],
  ['attestation.tee', { title: 'Confidential hardware', why: 'Without a hardware TEE nothing stops the operator from reading prompts: a development service only.' }],
  ['attestation.report_data', { title: 'The hardware signed this binding', why: 'The report data inside the signed hardware report is the hash the page computed itself.' }],
  ['attestation.jwks', { title: 'The hardware vouches for the receipt keys', why: 'The keys bound by the hardware report are the keys that sign receipts.' }],
  ['attestation.measurement', { title: 'Launch measurement', why: 'The hash of the code the enclave was started with, as the hardware measured it.' }],
  ['snp.', { title: 'AMD SEV-SNP evidence', why: 'The report must be signed by a key that chains up to AMD\'s root, for a chip with acceptable firmware.' }],
  ['tdx.', { title: 'Intel TDX evidence', why: 'The quote must be signed by a key that chains up to Intel\'s root, for a platform with acceptable firmware.' }],
  ['reference.', { title: 'Reference values', why: 'Values your auditor expects, obtained independently of the service: they prove which code runs, not only which hardware.' }],
  ['eventlog.', { title: 'Measured boot', why: 'Replaying the boot log must give the registers the hardware signed; the log then says which kernel and software were loaded.' }],
  ['gpu.binding', { title: 'The hardware report vouches for these GPU reports', why: 'The CPU\'s signed report carries the hash of each GPU report, so no GPU report can be swapped in or left out.' }],
  ['gpu.evidence', { title: 'GPU evidence', why: 'Without a GPU report nothing shows the GPUs run in confidential-computing mode.' }],
  ['gpu.rims', { title: 'GPU reference values (RIMs)', why: 'NVIDIA publishes signed lists of the measurements its drivers and VBIOS images produce; the page compares the GPU with the files you load.' }],
  ['gpu.rim[].signature', { title: 'NVIDIA signed this RIM', why: 'The RIM\'s XML signature shows nobody changed the measurements in it since it was signed.' }],
  ['gpu.rim[].chain', { title: 'The RIM\'s signer is NVIDIA\'s', why: 'The key that signed the RIM must chain up to NVIDIA\'s RIM root, built into this page, and be valid now; otherwise anyone could have written it.' }],
  ['gpu[].report', { title: 'GPU report', why: 'The GPU\'s signed answer to this page\'s request: the measurements of its firmware and driver, read here byte by byte.' }],
  ['gpu[].certificates', { title: 'GPU certificates', why: 'The GPU\'s own device certificate and the certificates above it, as the GPU returned them.' }],
  ['gpu[].signature', { title: 'The GPU signed its report', why: 'A key that never leaves the GPU signed the measurements, so nobody changed them on the way to this page.' }],
  ['gpu[].chain', { title: 'GPU certificate chain', why: 'Each certificate is signed by the next one up, so the GPU\'s key is vouched for step by step.' }],
  ['gpu[].root', { title: 'A genuine NVIDIA GPU', why: 'The chain ends at NVIDIA\'s Device Identity root, built into this page: only a real NVIDIA GPU holds a key certified by it.' }],
  ['gpu[].fwid', { title: 'Certified GPU firmware', why: 'The firmware identity in the report must equal the one NVIDIA certified together with the GPU\'s key.' }],
  ['gpu[].nonce', { title: 'Fresh GPU report', why: 'The GPU signed this page\'s random number, so its report was made now, not replayed from the past.' }],
  ['gpu[].driver_rim', { title: 'Reference values for the GPU driver', why: 'A RIM you loaded must describe exactly the driver version the GPU reports.' }],
  ['gpu[].vbios_rim', { title: 'Reference values for the GPU VBIOS', why: 'A RIM you loaded must describe exactly the VBIOS version the GPU reports.' }],
  ['gpu[].measurements', { title: 'GPU firmware measurements', why: 'Each measurement must equal a value NVIDIA signed in the RIMs; without RIM files they are compared with nothing.' }],
  ['gpu[].revocation', { title: 'GPU certificate revocation', why: 'Whether NVIDIA revoked a certificate is known only to NVIDIA\'s online OCSP service, which this page does not ask.' }],
  ['gpu', { title: 'GPU evidence', why: 'A genuine NVIDIA GPU in confidential-computing mode, with firmware and driver matching NVIDIA\'s signed reference values.' }],
  ['receipt.', { title: 'Receipt', why: 'A receipt signed by the attested key proves which enclave, policy and model served this exact request and response.' }],
  ['policy.', { title: 'Policy', why: 'The model that served the request is one the attested policy declares, with the same weights hash.' }],
];

/** `gpu[1].nonce` and `gpu.rim[0].chain` are explained as `gpu[].nonce` and `gpu.rim[].chain`: one text per kind of check. */
export function explain(name: string): Explanation {
  const key = name.replace(/\[\d+\]/g, '[]');
  const hit = EXPLANATIONS.find(([prefix]) => key === prefix || key.startsWith(prefix.endsWith('.') ? prefix : `${prefix}.`) || key.startsWith(prefix));
  return hit?.[1] ?? { title: name, why: '' };
}
