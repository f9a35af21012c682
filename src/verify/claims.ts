export { RECEIPT_SCHEMA_VERSION, type ReceiptClaims, type SelectedModel } from '../protocol/receipt-claims.ts';
export type { Tee } from '../protocol/attestation.ts';

const HEX = /^(?:[0-9a-f]{2})+$/;
const SHA256_TAG = /^sha256:[0-9a-f]{64}$/;
const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z$/;

/** Everything wrong with a payload's shape, as short phrases; empty when it is a well-formed receipt. */
export function receiptShapeProblems(payload: unknown): string[] {
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) return ['the payload is not a JSON object'];
  const c = payload as Record<string, unknown>;
  const problems: string[] = [];
  const str = (name: string) => {
    if (typeof c[name] !== 'string') problems.push(`${name} is not a string`);
  };
  ['schema_version', 'receipt_id', 'nonce', 'issued_at'].forEach(str);
  if (c.receipt_type !== 'model' && c.receipt_type !== 'message') problems.push('receipt_type is neither "model" nor "message"');
  if (c.tee !== 'sev-snp' && c.tee !== 'tdx' && c.tee !== 'none') problems.push('tee is not "sev-snp", "tdx" or "none"');
  if (typeof c.enclave_measurement !== 'string' || !HEX.test(c.enclave_measurement)) problems.push('enclave_measurement is not lowercase hex');
  if (typeof c.policy_hash !== 'string' || !SHA256_TAG.test(c.policy_hash)) problems.push('policy_hash is not "sha256:" + 64 hex');
  const model = c.selected_model;
  if (typeof model !== 'object' || model === null || Array.isArray(model)) {
    problems.push('selected_model is not an object');
  } else {
    for (const name of ['provider', 'model_id', 'model_hash']) {
      if (typeof (model as Record<string, unknown>)[name] !== 'string') problems.push(`selected_model.${name} is not a string`);
    }
  }
  if (typeof c.issued_at === 'string' && !RFC3339_UTC.test(c.issued_at)) problems.push('issued_at is not an RFC 3339 UTC timestamp');
  if (typeof c.iat !== 'number' || !Number.isSafeInteger(c.iat)) problems.push('iat is not an integer');
  if (c.tee === 'none' && c.attestation_hash !== undefined) problems.push('attestation_hash is present although tee is none');
  if (c.tee !== 'none' && c.tee !== undefined && (typeof c.attestation_hash !== 'string' || !SHA256_TAG.test(c.attestation_hash))) {
    problems.push('attestation_hash is not "sha256:" + 64 hex');
  }
  if (c.endpoint !== undefined && (typeof c.endpoint !== 'string' || !c.endpoint.startsWith('/'))) problems.push('endpoint is not a path');
  if (c.receipt_type === 'message') {
    str('completion_id');
    for (const name of ['request_hash', 'response_hash']) {
      if (typeof c[name] !== 'string' || !SHA256_TAG.test(c[name] as string)) problems.push(`${name} is not "sha256:" + 64 hex`);
    }
    if (c.forwarded_request_hash !== undefined && (typeof c.forwarded_request_hash !== 'string' || !SHA256_TAG.test(c.forwarded_request_hash))) {
      problems.push('forwarded_request_hash is not "sha256:" + 64 hex');
    }
  }
  return problems;
}
