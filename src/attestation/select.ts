/**
 * Chooses the attestation provider at start.
 *
 * Returns `{ provider, warning? }`: the caller logs `warning` loudly (level warn, at start) whenever it is set.
 * It is set when the result has no hardware behind it: `none` configured, or `auto` on a machine without
 * configfs-tsm (the only case where Sigil falls back to none). A configured `sev-snp` or `tdx` that the machine
 * does not offer is an Error naming the path and the provider: serving unattested receipts there would be a lie.
 */
import { createConfigfsTsmProvider, nodeTsmFs, probeConfigfsTsm, tsmReportDir, type TsmFs } from './configfs-tsm.ts';
import { createNoneProvider } from './none.ts';
import type { AttestationProvider } from './provider.ts';

export interface AttestationSelection {
  provider: 'auto' | 'none' | 'sev-snp' | 'tdx';
  tsmPath: string;
  /** For tests: a configfs stand-in. */
  fs?: TsmFs;
}

export interface SelectedAttestationProvider {
  provider: AttestationProvider;
  /** Set when the provider has no hardware behind it; log it loudly. */
  warning?: string;
}

export const NO_HARDWARE_WARNING =
  'attestation provider is none: no hardware evidence, receipts carry tee "none" and an all-zero measurement (development only)';

export async function selectAttestationProvider(cfg: AttestationSelection): Promise<SelectedAttestationProvider> {
  const fs = cfg.fs ?? nodeTsmFs;
  if (cfg.provider === 'none') return { provider: createNoneProvider(), warning: NO_HARDWARE_WARNING };
  if (cfg.provider === 'sev-snp' || cfg.provider === 'tdx') {
    return { provider: await createConfigfsTsmProvider({ tsmPath: cfg.tsmPath, expect: cfg.provider, fs }) };
  }
  const probe = await probeConfigfsTsm(cfg.tsmPath, fs);
  if (probe === undefined) {
    return {
      provider: createNoneProvider(),
      warning: `attestation provider auto found no configfs-tsm at ${tsmReportDir(cfg.tsmPath)}; falling back to none: ${NO_HARDWARE_WARNING}`,
    };
  }
  // A configfs-tsm served by something other than sev_guest or tdx_guest is not silently ignored.
  return { provider: await createConfigfsTsmProvider({ tsmPath: cfg.tsmPath, fs }) };
}
