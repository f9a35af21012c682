/**
 * The few NVML calls GPU attestation needs, through koffi against libnvidia-ml.so.1 (the library NVIDIA's driver
 * installs). Structure layouts as in NVIDIA's nvml.h (r550+). Nothing here decides policy: see gpu-evidence.ts.
 */
import { loadKoffi as loadKoffiAddon } from '../artifact.ts';
import { SigilError } from '../../protocol/sigil-error.ts';
import { GpuEvidenceUnusable } from './evidence-unusable.ts';

export const DEFAULT_NVML_LIBRARY = 'libnvidia-ml.so.1';
const NVML_SUCCESS = 0;
/** nvmlConfComputeSystemState_t.ccFeature: confidential computing enabled. */
export const NVML_CC_SYSTEM_FEATURE_ENABLED = 1;
/** nvmlConfComputeSystemState_t.devToolsMode: developer tools mode on (the GPU's memory is not protected from the host). */
export const NVML_CC_SYSTEM_DEVTOOLS_MODE_ON = 1;
const NONCE_BYTES = 32;
const REPORT_MAX = 8192;
const CEC_REPORT_MAX = 4096;
const CERT_CHAIN_MAX = 4096;
const ATTESTATION_CERT_CHAIN_MAX = 5120;

/** nvmlDeviceArchitecture_t, as nvml.h numbers it. */
const ARCHITECTURES: Readonly<Record<number, string>> = {
  2: 'kepler',
  3: 'maxwell',
  4: 'pascal',
  5: 'volta',
  6: 'turing',
  7: 'ampere',
  8: 'ada',
  9: 'hopper',
  10: 'blackwell',
};

export class NvmlError extends SigilError<'ERR_NVML'> {
  readonly call: string;
  readonly status: number;

  constructor(call: string, status: number, text: string) {
    super('ERR_NVML', `${call} failed: ${text} (NVML status ${status})`);
    this.call = call;
    this.status = status;
  }
}

export interface ConfComputeState {
  environment: number;
  ccFeature: number;
  devToolsMode: number;
}

export interface NvmlGpuReport {
  /** The SPDM GET_MEASUREMENTS request and response, attestationReport[0..attestationReportSize). */
  report: Buffer;
  /** attestationCertChain[0..attestationCertChainSize): the PEM chain whose leaf signed the report. */
  certificates: Buffer;
}

/** An initialised NVML: every call throws NvmlError on a status other than NVML_SUCCESS. */
export interface Nvml {
  confComputeState(): ConfComputeState;
  deviceCount(): number;
  architecture(index: number): string;
  /** Asks GPU `index` for an attestation report answering `nonce` (32 bytes), and for its certificate chain. */
  attest(index: number, nonce: Uint8Array): Promise<NvmlGpuReport>;
  shutdown(): void;
}

type Koffi = typeof import('koffi');
let koffiLoaded: Koffi | undefined;

/** koffi (a native addon) is loaded on first use only, so `attestation.gpu: off` never loads native code. */
function loadKoffi(): Koffi {
  if (koffiLoaded !== undefined) return koffiLoaded;
  const koffi = loadKoffiAddon();
  // The structures are registered by name once per process; the function prototypes below refer to them.
  koffi.struct('nvmlConfComputeSystemState_t', { environment: 'uint32_t', ccFeature: 'uint32_t', devToolsMode: 'uint32_t' });
  koffi.struct('nvmlConfComputeGpuAttestationReport_t', {
    isCecAttestationReportPresent: 'uint32_t',
    attestationReportSize: 'uint32_t',
    cecAttestationReportSize: 'uint32_t',
    nonce: koffi.array('uint8_t', NONCE_BYTES, 'Typed'),
    attestationReport: koffi.array('uint8_t', REPORT_MAX, 'Typed'),
    cecAttestationReport: koffi.array('uint8_t', CEC_REPORT_MAX, 'Typed'),
  });
  koffi.struct('nvmlConfComputeGpuCertificate_t', {
    certChainSize: 'uint32_t',
    attestationCertChainSize: 'uint32_t',
    certChain: koffi.array('uint8_t', CERT_CHAIN_MAX, 'Typed'),
    attestationCertChain: koffi.array('uint8_t', ATTESTATION_CERT_CHAIN_MAX, 'Typed'),
  });
  koffi.pointer('nvmlDevice_t', koffi.opaque('nvmlDevice_st'));
  koffiLoaded = koffi;
  return koffi;
}

interface RawReport {
  attestationReportSize: number;
  attestationReport: Uint8Array;
}

interface RawCertificate {
  attestationCertChainSize: number;
  attestationCertChain: Uint8Array;
}

function bounded(bytes: Uint8Array, size: number, max: number, what: string): Buffer {
  if (size > max) throw new GpuEvidenceUnusable(`NVML reported a ${what} of ${size} bytes, more than the ${max} its structure holds`);
  return Buffer.from(bytes.subarray(0, size));
}

/** Loads NVML from `library` (a name the dynamic loader resolves, or a path) and initialises it; throws when either fails. */
export function openNvml(library: string = DEFAULT_NVML_LIBRARY): Nvml {
  const lib = loadKoffi().load(library);
  const errorString = lib.func('const char *nvmlErrorString(int result)');
  const init = lib.func('int nvmlInit_v2()');
  const shutdown = lib.func('int nvmlShutdown()');
  const getConfComputeState = lib.func('int nvmlSystemGetConfComputeState(_Out_ nvmlConfComputeSystemState_t *state)');
  const getCount = lib.func('int nvmlDeviceGetCount_v2(_Out_ uint32_t *count)');
  const getHandle = lib.func('int nvmlDeviceGetHandleByIndex_v2(uint32_t index, _Out_ nvmlDevice_t *device)');
  const getArchitecture = lib.func('int nvmlDeviceGetArchitecture(nvmlDevice_t device, _Out_ uint32_t *arch)');
  const getReport = lib.func('int nvmlDeviceGetConfComputeGpuAttestationReport(nvmlDevice_t device, _Inout_ nvmlConfComputeGpuAttestationReport_t *report)');
  const getCertificate = lib.func('int nvmlDeviceGetConfComputeGpuCertificate(nvmlDevice_t device, _Out_ nvmlConfComputeGpuCertificate_t *cert)');

  const check = (call: string, status: number): void => {
    if (status !== NVML_SUCCESS) throw new NvmlError(call, status, String(errorString(status)));
  };
  const handle = (index: number): unknown => {
    const out: unknown[] = [null];
    check('nvmlDeviceGetHandleByIndex_v2', getHandle(index, out) as number);
    return out[0];
  };
  // Generating a report takes the GPU a while: run it on koffi's worker so the event loop keeps serving.
  const reportAsync = (device: unknown, request: Record<string, unknown>): Promise<number> =>
    new Promise((resolve, reject) => getReport.async(device, request, (err: unknown, status: number) => (err ? reject(err) : resolve(status))));

  check('nvmlInit_v2', init() as number);
  return {
    confComputeState() {
      const out: Record<string, number> = {};
      check('nvmlSystemGetConfComputeState', getConfComputeState(out) as number);
      return { environment: out.environment!, ccFeature: out.ccFeature!, devToolsMode: out.devToolsMode! };
    },
    deviceCount() {
      const out = [0];
      check('nvmlDeviceGetCount_v2', getCount(out) as number);
      return out[0]!;
    },
    architecture(index) {
      const out = [0];
      check('nvmlDeviceGetArchitecture', getArchitecture(handle(index), out) as number);
      return ARCHITECTURES[out[0]!] ?? `unknown-${out[0]}`;
    },
    async attest(index, nonce) {
      if (nonce.length !== NONCE_BYTES) throw new RangeError(`the GPU nonce must be ${NONCE_BYTES} bytes, not ${nonce.length}`);
      const device = handle(index);
      const request: Record<string, unknown> = {
        isCecAttestationReportPresent: 0,
        attestationReportSize: 0,
        cecAttestationReportSize: 0,
        nonce: Uint8Array.from(nonce),
        attestationReport: new Uint8Array(REPORT_MAX),
        cecAttestationReport: new Uint8Array(CEC_REPORT_MAX),
      };
      check('nvmlDeviceGetConfComputeGpuAttestationReport', await reportAsync(device, request));
      const raw = request as unknown as RawReport;
      const cert: Record<string, unknown> = {};
      check('nvmlDeviceGetConfComputeGpuCertificate', getCertificate(device, cert) as number);
      const chain = cert as unknown as RawCertificate;
      return {
        report: bounded(raw.attestationReport, raw.attestationReportSize, REPORT_MAX, 'report'),
        certificates: bounded(chain.attestationCertChain, chain.attestationCertChainSize, ATTESTATION_CERT_CHAIN_MAX, 'certificate chain'),
      };
    },
    shutdown() {
      shutdown();
    },
  };
}
