import type { Tee } from '../attestation/provider.ts';
// The receipt payload (docs/receipts.md#claims) is declared once, in src/protocol, so signer and verifier cannot disagree.
import { RECEIPT_SCHEMA_VERSION, type ReceiptClaims, type SelectedModel } from '../protocol/receipt-claims.ts';

export { RECEIPT_SCHEMA_VERSION, type ReceiptClaims, type SelectedModel };

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
  /** The path the request was made on (`/v1/messages`), signed as `endpoint` (the server always gives it). */
  endpoint?: string;
  model: SelectedModel;
  nonce: string;
  now: Date;
}

export interface MessageReceiptInput extends ModelReceiptInput {
  completionId: string;
  requestHash: string;
  /** The SHA-256 of the bytes the engine got, when they differ from the client's. */
  forwardedRequestHash?: string;
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
  if (input.endpoint !== undefined) claims.endpoint = input.endpoint;
  return claims;
}

export function modelReceiptClaims(ctx: ReceiptContext, input: ModelReceiptInput): ReceiptClaims {
  return baseClaims(ctx, input, 'model');
}

export function messageReceiptClaims(ctx: ReceiptContext, input: MessageReceiptInput): ReceiptClaims {
  const claims = baseClaims(ctx, input, 'message');
  claims.completion_id = input.completionId;
  claims.request_hash = input.requestHash;
  if (input.forwardedRequestHash !== undefined) claims.forwarded_request_hash = input.forwardedRequestHash;
  claims.response_hash = input.responseHash;
  return claims;
}
