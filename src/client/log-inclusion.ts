import type { Attested } from './attest.ts';
import type { Exchange } from './receipts.ts';
import { streamEndingOf } from '../protocol/stream-ending.ts';
import { splitReceiptStream } from '../verify/stream-receipt.ts';
import { TlogError } from '../protocol/tlog/errors.ts';
import type { TrustedLog } from '../verify/tlog/log-client.ts';
import { serviceLog, type InclusionVerdict } from '../verify/tlog/receipt-inclusion.ts';

/** A receipt a response carried, with the leaf index the response named for it (docs/log.md, "Each receipt names its place"). */
export interface LoggedReceipt {
  jws: string;
  index?: number;
}

const indexOf = (header: string | null): number | undefined => (header !== null && /^\d{1,15}$/.test(header) ? Number(header) : undefined);

/**
 * The receipts of one verified response and their leaf indexes: a JSON answer's message receipt (its index in
 * `X-<Brand>-Log-Index`, or sealed after the receipt); a stream's message receipt from its last comment (its index
 * there when sealed, else found by its receipt id) and, in the clear, its model receipt with the header's index.
 */
export function loggedReceipts(exchange: Exchange, indexHeader: string | null, sealedIndex: number | undefined, sealed: boolean): LoggedReceipt[] {
  const withIndex = (jws: string, index: number | undefined): LoggedReceipt => (index === undefined ? { jws } : { jws, index });
  if (!exchange.stream) return exchange.receiptHeader === null ? [] : [withIndex(exchange.receiptHeader, sealed ? sealedIndex : indexOf(indexHeader))];
  const out: LoggedReceipt[] = [];
  try {
    const split = splitReceiptStream(exchange.responseBytes, { ending: streamEndingOf(exchange.path) });
    out.push(withIndex(split.receipt, split.logIndex));
  } catch {
    // A stream without its receipt comment failed its receipt check already; nothing to look for in the log.
  }
  if (exchange.receiptHeader !== null) out.push(withIndex(exchange.receiptHeader, indexOf(indexHeader)));
  return out;
}

/** The log a verified attestation binds, served under the service's `/v1/log/`; fetched over the client's own connections. */
export function attestedLog(attested: Attested, baseURL: URL, fetchLog: typeof fetch): TrustedLog {
  if (attested.transparencyLog === null)
    throw new TlogError('ERR_TLOG_VKEY', "the service's attestation names no transparency log (it keeps none, or stopped keeping one)");
  return serviceLog(attested.transparencyLog, baseURL, fetchLog);
}

/** One verdict for all the receipts of a response: the first failure, else the message receipt's. */
export function responseVerdict(verdicts: InclusionVerdict[]): InclusionVerdict {
  return verdicts.find((v) => !v.ok) ?? verdicts[0]!;
}
