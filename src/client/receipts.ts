import { verdictOf, type Check } from '../verify/check.ts';
import type { ReceiptClaims } from '../verify/claims.ts';
import { verifyExchange, type ReceiptContext } from '../verify/exchange.ts';
import type { Attested } from './attest.ts';
import type { InclusionVerdict } from '../verify/tlog/receipt-inclusion.ts';

/** The verdict on one response's receipt, as the attested client exposes it. */
export interface ReceiptResult {
  /** The request's path, e.g. `/v1/chat/completions`. */
  path: string;
  stream: boolean;
  ok: boolean;
  checks: Check[];
  /** The receipt's claims, once its signature verified. */
  claims?: ReceiptClaims;
  /** A sentence for a response that carried no usable receipt. */
  problem?: string;
  /** The message receipt's leaf index in the transparency log, when the response named it (docs/log.md). */
  logIndex?: number;
  /**
   * When the attestation binds a transparency log and the receipt verified: the check that the log holds the response's
   * receipts, settled once their batch is integrated (at most the log's maximum merge delay). Never rejects.
   */
  inclusion?: Promise<InclusionVerdict>;
}

export interface Exchange {
  path: string;
  nonce: string;
  requestBytes: Uint8Array;
  responseBytes: Uint8Array;
  stream: boolean;
  /** The message receipt header of a JSON response. */
  receiptHeader: string | null;
}

/** What the attestation verified, as the core holds receipts to it; a development service only under the waiver the attestation took. */
function receiptContext(attested: Attested): ReceiptContext {
  const context: ReceiptContext = { jwks: attested.jwks, measurement: attested.measurement, policy: attested.policy, policyHash: attested.policyHash };
  if (attested.attestationHash !== undefined) context.attestationHash = attested.attestationHash;
  const noTee = attested.checks.find((c) => c.name === 'attestation.tee')?.waived;
  if (attested.tee === 'none' && noTee !== undefined) context.noHardwareEnclave = noTee;
  return context;
}

/** Checks a response's receipts with the verifier's one exchange check, against what the attestation verified and the exact bytes each way. */
export async function verifyExchangeReceipt(exchange: Exchange, attested: Attested): Promise<ReceiptResult> {
  const result = await verifyExchange(
    {
      path: exchange.path,
      stream: exchange.stream,
      nonce: exchange.nonce,
      request: exchange.requestBytes,
      response: exchange.responseBytes,
      ...(exchange.stream || exchange.receiptHeader === null ? {} : { receiptHeader: exchange.receiptHeader }),
    },
    receiptContext(attested),
  );
  const verdict: ReceiptResult = {
    path: exchange.path,
    stream: exchange.stream,
    ok: verdictOf(result.checks).outcome !== 'not-verified',
    checks: result.checks,
  };
  const missing = result.checks.find((c) => c.name === 'receipt.present');
  if (missing !== undefined) verdict.problem = missing.detail;
  if (result.claims !== undefined) verdict.claims = result.claims;
  return verdict;
}
