import type { LoadedConfig } from '../config/load.ts';
import { outsideVmProblem, policyUpstream } from './upstreams.ts';

export type HardwareTee = 'tdx' | 'sev-snp';

/** `sigil serve` on a hardware TEE refuses plaintext HTTP unless a terminator inside the enclave is declared. */
export function plaintextOnTeeProblem(config: LoadedConfig, tee: HardwareTee): string | undefined {
  if (config.tls.mode !== 'off' || config.tls.allow_plaintext) return undefined;
  return (
    `tls.mode is off on a ${tee} machine: prompts would cross the host's network in plaintext before reaching the enclave. ` +
    'Set tls.mode (self-signed, acme or files), or tls.allow_plaintext: true when a terminator inside the enclave fronts Sigil.'
  );
}

/**
 * What `sigil serve` would refuse in this config on a machine with this TEE, found without the
 * machine (`sigil config check --tee`): the provider, plaintext TLS, and engines outside the VM.
 */
export function teeStartProblems(config: LoadedConfig, tee: HardwareTee): string[] {
  const problems: string[] = [];
  const provider = config.attestation.provider;
  if (provider === 'none') problems.push(`attestation.provider: none would serve no evidence on a ${tee} machine; set auto or ${tee}`);
  else if (provider !== 'auto' && provider !== tee) problems.push(`attestation.provider: ${provider} cannot start on a ${tee} machine; set auto or ${tee}`);
  const plaintext = plaintextOnTeeProblem(config, tee);
  if (plaintext !== undefined) problems.push(plaintext);
  for (const [name, upstream] of Object.entries(config.upstreams)) {
    const problem = outsideVmProblem(policyUpstream(name, upstream));
    if (problem !== undefined) problems.push(problem);
  }
  return problems;
}
