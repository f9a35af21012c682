import type { Tee } from './attestation.ts';

/**
 * 1.1.0 adds `forwarded_request_hash`, 1.2.0 `endpoint` (docs/receipts.md): readers of an earlier 1.x ignore what they do not know.
 */
export const RECEIPT_SCHEMA_VERSION = '1.2.0';

/** What a receipt without `endpoint` (before 1.2.0) was signed for: one of the OpenAI endpoints, the only ones served then. */
export const ENDPOINTS_BEFORE_ENDPOINT_CLAIM: readonly string[] = ['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/responses'];

export interface SelectedModel {
  provider: string;
  model_id: string;
  model_hash: string;
}

/** A receipt's claims (docs/receipts.md): what the server signs and the verifier reads, declared once. */
export interface ReceiptClaims {
  schema_version: string;
  receipt_type: 'model' | 'message';
  receipt_id: string;
  enclave_measurement: string;
  tee: Tee;
  policy_hash: string;
  selected_model: SelectedModel;
  nonce: string;
  issued_at: string;
  iat: number;
  attestation_hash?: string;
  /** The path the request was made on, e.g. `/v1/chat/completions` or `/v1/messages` (1.2.0): one API's receipt cannot pass for another's. */
  endpoint?: string;
  completion_id?: string;
  request_hash?: string;
  /** Present when the engine got other bytes than the client sent (model renamed, extension fields removed): their SHA-256. */
  forwarded_request_hash?: string;
  response_hash?: string;
}
