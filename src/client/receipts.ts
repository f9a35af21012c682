import { verdictOf, type Check } from '../verify/check.ts';
import type { ReceiptClaims } from '../verify/claims.ts';
import { verifyReceipt, type ReceiptExpectations } from '../verify/receipt.ts';
import { splitReceiptStream } from '../verify/stream-receipt.ts';
import type { Attested } from './attest.ts';

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

/** Checks a response's message receipt against what the attestation verified and the exact bytes each way. */
export async function verifyExchangeReceipt(exchange: Exchange, attested: Attested): Promise<ReceiptResult> {
  let jws: string;
  let responseBytes = exchange.responseBytes;
  if (exchange.stream) {
    try {
      const split = splitReceiptStream(exchange.responseBytes, { ending: exchange.path.endsWith('/responses') ? 'event' : 'done' });
      jws = split.receipt;
      responseBytes = split.body;
    } catch (err) {
      return { path: exchange.path, stream: true, ok: false, checks: [], problem: (err as Error).message };
    }
  } else if (exchange.receiptHeader === null) {
    return { path: exchange.path, stream: false, ok: false, checks: [], problem: 'the response carries no receipt header' };
  } else {
    jws = exchange.receiptHeader;
  }
  const expected: ReceiptExpectations = {
    nonce: exchange.nonce,
    measurement: attested.measurement,
    policyHash: attested.policyHash,
    requestBytes: exchange.requestBytes,
    responseBytes,
    receiptType: 'message',
  };
  if (attested.attestationHash !== undefined) expected.attestationHash = attested.attestationHash;
  const result = await verifyReceipt(jws, { jwks: attested.jwks, expected, allowNoTee: attested.tee === 'none' });
  const verdict: ReceiptResult = { path: exchange.path, stream: exchange.stream, ok: verdictOf(result.checks).outcome !== 'not-verified', checks: result.checks };
  if (result.claims !== undefined) verdict.claims = result.claims;
  return verdict;
}
