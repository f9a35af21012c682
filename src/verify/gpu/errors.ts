import { SigilError } from '../../protocol/sigil-error.ts';

/** Why a GPU's evidence or a RIM could not be read. Each code is stable: callers and tests match on it. */
export type GpuEvidenceErrorCode =
  | 'ERR_SPDM_TRUNCATED'
  | 'ERR_SPDM_MALFORMED'
  | 'ERR_SPDM_UNSUPPORTED'
  | 'ERR_GPU_CERTIFICATE'
  | 'ERR_GPU_OCSP_RESPONSE'
  | 'ERR_RIM_MALFORMED'
  | 'ERR_RIM_UNSUPPORTED';

export class GpuEvidenceError extends SigilError<GpuEvidenceErrorCode> {
  constructor(code: GpuEvidenceErrorCode, message: string) {
    super(code, message);
  }
}

/** A check's detail for a failure to read GPU evidence: the stable code first, when there is one. */
export { describeError as describeGpuEvidenceError } from '../../protocol/sigil-error.ts';
