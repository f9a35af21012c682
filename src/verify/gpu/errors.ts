/** Why a GPU's evidence or a RIM could not be read. Each code is stable: callers and tests match on it. */
export type GpuEvidenceErrorCode =
  | 'ERR_SPDM_TRUNCATED'
  | 'ERR_SPDM_MALFORMED'
  | 'ERR_SPDM_UNSUPPORTED'
  | 'ERR_GPU_CERTIFICATE'
  | 'ERR_RIM_MALFORMED'
  | 'ERR_RIM_UNSUPPORTED';

export class GpuEvidenceError extends Error {
  readonly code: GpuEvidenceErrorCode;

  constructor(code: GpuEvidenceErrorCode, message: string) {
    super(message);
    this.name = 'GpuEvidenceError';
    this.code = code;
  }
}

/** A check's detail for a failure to read GPU evidence: the stable code first, when there is one. */
export function describeGpuEvidenceError(err: unknown): string {
  if (err instanceof GpuEvidenceError) return `${err.code}: ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}
