import type { Tee } from '../attestation/provider.ts';

/** SPEC 3: the receipt payload. `schema_version` is the semantic version of this shape. */
export const RECEIPT_SCHEMA_VERSION = '1.0.0';

export interface SelectedModel {
  provider: string;
  model_id: string;
  model_hash: string;
}

export interface ReceiptClaims {
  schema_version: typeof RECEIPT_SCHEMA_VERSION;
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
  response_hash?: string;
}

/** What stays the same for every receipt this process signs until the policy changes. */
export interface ReceiptContext {
  measurement: string;
  tee: Tee;
  policyHash: string;
  /** Absent when tee is none. */
  attestationHash?: string;
}

export interface ModelReceiptInput {
  receiptId: string;
  model: SelectedModel;
  nonce: string;
  now: Date;
}

export interface MessageReceiptInput extends ModelReceiptInput {
  completionId: string;
  requestHash: string;
  responseHash: string;
}

function baseClaims(ctx: ReceiptContext, input: ModelReceiptInput, type: ReceiptClaims['receipt_type']): ReceiptClaims {
  const claims: ReceiptClaims = {
    schema_version: RECEIPT_SCHEMA_VERSION,
    receipt_type: type,
    receipt_id: input.receiptId,
    enclave_measurement: ctx.measurement,
    tee: ctx.tee,
    policy_hash: ctx.policyHash,
    selected_model: input.model,
    nonce: input.nonce,
    issued_at: input.now.toISOString().replace(/\.\d{3}Z$/, 'Z'),
    iat: Math.floor(input.now.getTime() / 1000),
  };
  if (ctx.attestationHash !== undefined) claims.attestation_hash = ctx.attestationHash;
  return claims;
}

export function modelReceiptClaims(ctx: ReceiptContext, input: ModelReceiptInput): ReceiptClaims {
  return baseClaims(ctx, input, 'model');
}

export function messageReceiptClaims(ctx: ReceiptContext, input: MessageReceiptInput): ReceiptClaims {
  const claims = baseClaims(ctx, input, 'message');
  claims.completion_id = input.completionId;
  claims.request_hash = input.requestHash;
  claims.response_hash = input.responseHash;
  return claims;
}
