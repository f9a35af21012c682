import { SigilError } from '../../protocol/sigil-error.ts';

/** Why a piece of hardware evidence could not be read. Each code is stable: callers and tests match on it. */
export type EvidenceErrorCode =
  | 'ERR_SNP_REPORT_TRUNCATED'
  | 'ERR_SNP_REPORT_VERSION'
  | 'ERR_SNP_CERT_TABLE_TRUNCATED'
  | 'ERR_SNP_CERT_TABLE_MALFORMED'
  | 'ERR_TDX_QUOTE_TRUNCATED'
  | 'ERR_TDX_QUOTE_VERSION'
  | 'ERR_TDX_QUOTE_UNSUPPORTED'
  | 'ERR_EVIDENCE_CERTIFICATE'
  | 'ERR_EVIDENCE_ENCODING'
  | 'ERR_EVENT_LOG_TRUNCATED'
  | 'ERR_EVENT_LOG_MALFORMED'
  | 'ERR_CCEL_TABLE'
  | 'ERR_COLLATERAL';

export class EvidenceError extends SigilError<EvidenceErrorCode> {
  constructor(code: EvidenceErrorCode, message: string) {
    super(code, message);
  }
}

/** A check's detail for a failure to read evidence: the stable code first, when there is one. */
export { describeError as describeEvidenceError } from '../../protocol/sigil-error.ts';
