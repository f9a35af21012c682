import { SigilError } from '../../protocol/sigil-error.ts';
/** GPU evidence that cannot be used: an answer to another nonce, or a size larger than its structure holds. */
export class GpuEvidenceUnusable extends SigilError<'ERR_GPU_EVIDENCE_UNUSABLE'> {
  constructor(message: string) {
    super('ERR_GPU_EVIDENCE_UNUSABLE', message);
  }
}
