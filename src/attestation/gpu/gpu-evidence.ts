/**
 * GPU evidence for the attestation document (docs/attestation.md#gpu-evidence): each confidential-computing GPU's SPDM report for the
 * document's nonce and its certificate chain, through NVML. `attestation.gpu` says what a machine without them means.
 */
import type { Logger } from '../../logger/logger.ts';
import type { GpuEvidence } from '../../protocol/attestation.ts';
import { verifyGpuEvidence, type GpuTrustRoots } from '../../verify/gpu/index.ts';
import { DEFAULT_NVML_LIBRARY, NVML_CC_SYSTEM_DEVTOOLS_MODE_ON, NVML_CC_SYSTEM_FEATURE_ENABLED, openNvml, type Nvml } from './nvml.ts';
import { SigilError } from '../../protocol/sigil-error.ts';
import { GpuEvidenceUnusable } from './evidence-unusable.ts';

export type GpuAttestationMode = 'auto' | 'required' | 'off';

export interface GpuCollectorOptions {
  mode: GpuAttestationMode;
  /** libnvidia-ml.so.1 by default; a path for tests. */
  nvmlLibrary?: string;
  /** Told once at start why GPUs are left out (warn when NVML is there but unusable; info when there is none). */
  logger: Pick<Logger, 'info' | 'warn'>;
  /** `required` verifies what it collects as clients do: against these roots (default NVIDIA's), at this time (default now). For tests. */
  verification?: { roots?: GpuTrustRoots; at?: Date };
}

export interface GpuCollector {
  /** How many GPUs each document will carry evidence for. */
  gpus: number;
  collect(nonce: Uint8Array): Promise<GpuEvidence[]>;
  close(): void;
}

/** Refusal to start: `attestation.gpu: required` on a machine that cannot produce GPU evidence. */
export class GpuAttestationUnavailable extends SigilError<'ERR_GPU_ATTESTATION_UNAVAILABLE'> {
  constructor(reason: string) {
    super('ERR_GPU_ATTESTATION_UNAVAILABLE', `attestation.gpu is required but ${reason}; set attestation.gpu to auto or off to serve without GPU evidence`);
  }
}

const NONE: GpuCollector = { gpus: 0, collect: async () => [], close: () => {} };

/** The request nonce of an SPDM GET_MEASUREMENTS report: bytes 4-35 (after version, code, param1, param2). */
function requestNonce(report: Buffer): string {
  return report.subarray(4, 36).toString('hex');
}

async function collectFrom(nvml: Nvml, gpus: { index: number; arch: string }[], nonce: Uint8Array): Promise<GpuEvidence[]> {
  const wanted = Buffer.from(nonce).toString('hex');
  return Promise.all(
    gpus.map(async ({ index, arch }) => {
      const { report, certificates } = await nvml.attest(index, nonce);
      // A GPU that answers another nonce gives a report no verifier will accept: fail here, loudly, instead.
      if (requestNonce(report) !== wanted) throw new GpuEvidenceUnusable(`GPU ${index} answered nonce ${requestNonce(report)} instead of ${wanted}`);
      return { index, arch, report: report.toString('base64'), certificates: certificates.toString('base64'), nonce: wanted };
    }),
  );
}

/**
 * `required` serves only GPU evidence that verifies with the verifier clients use (src/verify/gpu):
 * each report's signature by its GPU's key, the chain to NVIDIA's root, the FWID and the nonce, one
 * entry per GPU. NVML's word on confidential-computing mode is not enough; the reports must show it.
 */
function verifiedOrRefused(entries: GpuEvidence[], nonce: Uint8Array, verification: GpuCollectorOptions['verification']): GpuEvidence[] {
  const { checks } = verifyGpuEvidence(entries, {
    nonce,
    ...(verification?.roots ? { roots: verification.roots } : {}),
    ...(verification?.at ? { at: verification.at } : {}),
  });
  const failed = checks.filter((c) => !c.ok);
  if (failed.length > 0)
    throw new GpuAttestationUnavailable(`the GPU evidence NVML returned does not verify (${failed.map((c) => `${c.name}: ${c.detail}`).join('; ')})`);
  return entries;
}

/**
 * Opens NVML at start and decides: `off` never looks; `auto` collects from every GPU when confidential computing is
 * on and otherwise carries none (with a warning); `required` throws GpuAttestationUnavailable unless at least one
 * GPU runs in confidential-computing mode, and every collection (the start evidence first, before Sigil listens)
 * rejects with it unless the reports verify.
 */
export function createGpuCollector(options: GpuCollectorOptions): GpuCollector {
  if (options.mode === 'off') return NONE;
  const library = options.nvmlLibrary ?? DEFAULT_NVML_LIBRARY;
  const unavailable = (reason: string, level: 'info' | 'warn' = 'warn'): GpuCollector => {
    if (options.mode === 'required') throw new GpuAttestationUnavailable(reason);
    options.logger[level](`attestation.gpu auto: ${reason}; documents carry no GPU evidence`);
    return NONE;
  };
  let nvml: Nvml;
  try {
    nvml = openNvml(library);
  } catch (err) {
    const message = (err as Error).message;
    // Every machine without an NVIDIA driver gets here: say that plainly rather than echo the loader's error.
    if (options.mode === 'auto' && /cannot open shared object file|No such file|not found/i.test(message)) {
      return unavailable(`no NVIDIA driver here (the NVML library ${library} is not installed)`, 'info');
    }
    return unavailable(`NVML (${library}) cannot be loaded: ${message}`, 'info');
  }
  try {
    const state = nvml.confComputeState();
    if (state.ccFeature !== NVML_CC_SYSTEM_FEATURE_ENABLED) {
      nvml.shutdown();
      return unavailable('the GPUs are not in confidential-computing mode (NVML ccFeature off)');
    }
    const count = nvml.deviceCount();
    if (count === 0) {
      nvml.shutdown();
      return unavailable('NVML lists no GPU');
    }
    if (state.devToolsMode === NVML_CC_SYSTEM_DEVTOOLS_MODE_ON) {
      options.logger.warn('the GPUs run confidential computing in developer-tools mode: the host can read GPU memory; do not serve real prompts');
    }
    const gpus = Array.from({ length: count }, (_, index) => ({ index, arch: nvml.architecture(index) }));
    const collect =
      options.mode === 'required'
        ? async (nonce: Uint8Array) => verifiedOrRefused(await collectFrom(nvml, gpus, nonce), nonce, options.verification)
        : (nonce: Uint8Array) => collectFrom(nvml, gpus, nonce);
    return {
      gpus: count,
      collect,
      close: () => nvml.shutdown(),
    };
  } catch (err) {
    nvml.shutdown();
    if (options.mode === 'required') throw new GpuAttestationUnavailable(`NVML failed: ${(err as Error).message}`);
    throw err;
  }
}
