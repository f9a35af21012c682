import type { Tee } from './attestation.ts';

/** 1.1.0 adds `forwarded_request_hash` (docs/receipts.md): readers of 1.0.0 ignore it. */
export const RECEIPT_SCHEMA_VERSION = '1.1.0';

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
  completion_id?: string;
  request_hash?: string;
  /** Present when the engine got other bytes than the client sent (model renamed, extension fields removed): their SHA-256. */
  forwarded_request_hash?: string;
  response_hash?: string;
}
