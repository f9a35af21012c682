import { fail, pass, waive, type Check } from './check.ts';
import type { ReceiptClaims } from './claims.ts';
import { policyModelCheck } from './policy-model.ts';
import { verifyReceipt, type ReceiptExpectations, type RequiredExpectation } from './receipt.ts';
import { splitReceiptStream } from './stream-receipt.ts';
import { streamEndingOf } from '../protocol/stream-ending.ts';

/**
 * One request and its answer as the caller sent and received them, with the receipts they carried
 * (docs/receipts.md, "How to verify"). Whatever was not kept stays absent and its check fails, unless waived.
 */
export interface ServiceExchange {
  /** The request's path, e.g. `/v1/chat/completions`: it says where a stream ends. */
  path: string;
  stream: boolean;
  /** The nonce the receipt must carry: the one sent as X-<Brand>-Nonce, the sealed exchange's, or "" for none. */
  nonce: string;
  /** The exact request body bytes sent (before sealing). */
  request?: Uint8Array;
  /**
   * The exact response body bytes received (after opening): a JSON answer, or an event stream. A stream still
   * ending with its `: receipt` comment is cut where its endpoint's stream ends; one whose message receipt came
   * apart (`receipt`) is hashed as it is.
   */
  response?: Uint8Array;
  /** X-<Brand>-Receipt: a JSON answer's message receipt, a stream's model receipt. */
  receiptHeader?: string;
  /** X-<Brand>-Receipt-Id. */
  receiptId?: string;
  /** The message receipt when it came apart from the body: a kept file, GET /v1/receipts/{id}, a sealed trailer. */
  receipt?: string;
  /** The model the caller asked for. */
  model?: string;
  /** The `id` of the completion the caller received. */
  completionId?: string;
}

/** What a verified service vouches for, to which every receipt it signs is held. */
export interface ReceiptContext {
  jwks: { keys: unknown[] };
  /** The launch measurement the receipts must name; absent, `receipt.measurement` fails unless waived. */
  measurement?: string;
  /** The policy document served and bound; its hash is what receipts must name, its models what they may use. */
  policy?: unknown;
  /** `policyHash` of a policy known only by its hash. */
  policyHash?: string;
  /** `"sha256:" + hex` of the start evidence, which receipts name; absent without hardware. */
  attestationHash?: string;
  /** The caller accepts a service without a hardware enclave for this reason: `receipt.tee` is waived, never passed. */
  noHardwareEnclave?: string;
  /** Required expectations the caller does not have, each with the reason the report shows. */
  waive?: Partial<Record<RequiredExpectation, string>>;
  now?: Date;
}

export interface ExchangeVerification {
  checks: Check[];
  /** The message receipt's claims, once its signature verified. */
  claims?: ReceiptClaims;
  /** RFC 7638 thumbprint of the key that verified the message receipt. */
  kid?: string;
}

/** The message receipt and the bytes it hashes, or why there is none. */
function messageReceipt(exchange: ServiceExchange): { receipt: string; response: Uint8Array | undefined; modelReceipt?: string } | string {
  if (!exchange.stream) {
    const receipt = exchange.receipt ?? exchange.receiptHeader;
    return receipt === undefined ? 'the response carries no receipt header' : { receipt, response: exchange.response };
  }
  const model = exchange.receiptHeader === undefined ? {} : { modelReceipt: exchange.receiptHeader };
  if (exchange.receipt !== undefined) return { receipt: exchange.receipt, response: exchange.response, ...model };
  if (exchange.response === undefined) return 'the stream was not kept, so its receipt comment cannot be read';
  try {
    const split = splitReceiptStream(exchange.response, { ending: streamEndingOf(exchange.path) });
    return { receipt: split.receipt, response: split.body, ...model };
  } catch (err) {
    return (err as Error).message;
  }
}

function receiptExpectations(exchange: ServiceExchange, context: ReceiptContext, response: Uint8Array | undefined): ReceiptExpectations {
  const expected: ReceiptExpectations = { nonce: exchange.nonce, endpoint: exchange.path };
  if (context.measurement !== undefined) expected.measurement = context.measurement;
  if (context.policyHash !== undefined) expected.policyHash = context.policyHash;
  if (context.attestationHash !== undefined) expected.attestationHash = context.attestationHash;
  if (exchange.model !== undefined) expected.modelId = exchange.model;
  if (exchange.request !== undefined) expected.requestBytes = exchange.request;
  if (response !== undefined) expected.responseBytes = response;
  return expected;
}

/** A development receipt's `receipt.tee` carries the caller's own reason for accepting it. */
function withTeeWaiver(checks: Check[], reason: string | undefined): Check[] {
  return reason === undefined ? checks : checks.map((c) => (c.name === 'receipt.tee' && !c.ok ? waive(c, reason) : c));
}

/**
 * The receipts of one exchange against what the verified service vouches for and the exact bytes each way:
 * the message receipt (`receipt.*`), a stream's model receipt (`model_receipt.*`) and that both name one receipt
 * id (`live.receipt_id`), and that the model that answered is one the policy allows (`policy.model`).
 */
export async function verifyExchange(exchange: ServiceExchange, context: ReceiptContext): Promise<ExchangeVerification> {
  const found = messageReceipt(exchange);
  if (typeof found === 'string') return { checks: [fail('receipt.present', found)] };
  const expected = receiptExpectations(exchange, context, found.response);
  if (exchange.completionId !== undefined) expected.completionId = exchange.completionId;
  const options = {
    jwks: context.jwks,
    allowNoTee: context.noHardwareEnclave !== undefined,
    ...(context.waive === undefined ? {} : { waive: context.waive }),
    ...(context.now === undefined ? {} : { now: context.now }),
  };
  const message = await verifyReceipt(found.receipt, { ...options, expected: { ...expected, receiptType: 'message' } });
  const checks = withTeeWaiver(message.checks, context.noHardwareEnclave);
  if (found.modelReceipt !== undefined) {
    const modelExpected: ReceiptExpectations = { ...expected, receiptType: 'model' };
    delete modelExpected.requestBytes;
    delete modelExpected.responseBytes;
    delete modelExpected.completionId;
    const model = await verifyReceipt(found.modelReceipt, { ...options, expected: modelExpected });
    checks.push(...withTeeWaiver(model.checks, context.noHardwareEnclave).map((c) => ({ ...c, name: c.name.replace(/^receipt\./, 'model_receipt.') })));
    const ids = [message.claims?.receipt_id, model.claims?.receipt_id, exchange.receiptId];
    checks.push(
      ids.every((id) => id !== undefined && id === ids[0])
        ? pass('live.receipt_id', `the model and message receipts and the receipt id header all name ${ids[0]}`)
        : fail('live.receipt_id', `receipt ids differ: message ${String(ids[0])}, model ${String(ids[1])}, header ${String(ids[2])}`),
    );
  }
  if (message.claims !== undefined && context.policy !== undefined) checks.push(policyModelCheck(context.policy, message.claims.selected_model));
  const out: ExchangeVerification = { checks };
  if (message.claims !== undefined) out.claims = message.claims;
  if (message.kid !== undefined) out.kid = message.kid;
  return out;
}
