import type { IncomingHttpHeaders } from 'node:http';
import { NONCE_VALUE } from '../protocol/brand-headers.ts';
import { httpError } from '../protocol/errors.ts';

export interface ReceiptRequest {
  wanted: boolean;
  /** The client's nonce, "" when none was sent. */
  nonce: string;
}

/** docs/api.md#headers: `X-<Brand>-Receipt: true` asks for receipts; `X-<Brand>-Nonce` is 1-256 printable ASCII characters. */
export function readReceiptRequest(headers: IncomingHttpHeaders, names: { receipt: string; nonce: string }): ReceiptRequest {
  const flag = headers[names.receipt];
  // Only HTTP's optional whitespace (SP, HTAB) is stripped, as the parser does: `\u00a0true` is not `true`.
  const value = typeof flag === 'string' ? flag.replace(/^[ \t]+|[ \t]+$/g, '').toLowerCase() : undefined;
  // Anything but true or false (`yes`, `1`) is refused: ignoring it would silently send no receipt.
  if (value !== undefined && value !== 'true' && value !== 'false') {
    throw httpError('invalid_value', `The ${names.receipt} header must be true or false.`, names.receipt);
  }
  const wanted = value === 'true';
  const nonce = headers[names.nonce];
  if (nonce === undefined) return { wanted, nonce: '' };
  if (typeof nonce !== 'string' || !NONCE_VALUE.test(nonce)) {
    throw httpError('invalid_nonce', `The ${names.nonce} header must be 1 to 256 printable ASCII characters.`, names.nonce);
  }
  return { wanted, nonce };
}
