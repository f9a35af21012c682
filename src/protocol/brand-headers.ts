/**
 * The receipt headers carry the operator's brand word (docs/api.md, "Receipts"): `X-<Brand>-Receipt: true` asks
 * for receipts, `X-<Brand>-Nonce` carries the client's nonce, and answers carry `X-<Brand>-Receipt` and
 * `X-<Brand>-Receipt-Id`. The server, the verifier, the attested client and the trust page name them here, in
 * lower case (HTTP header names are case-insensitive, and Node reports them so).
 */
export interface BrandHeaders {
  receipt: string;
  nonce: string;
  receiptId: string;
  /** The receipt's leaf index in the transparency log (docs/log.md). */
  logIndex: string;
}

export function brandHeaders(brand: string): BrandHeaders {
  const b = brand.trim().toLowerCase();
  return { receipt: `x-${b}-receipt`, nonce: `x-${b}-nonce`, receiptId: `x-${b}-receipt-id`, logIndex: `x-${b}-log-index` };
}

/** What `X-<Brand>-Nonce` may hold (docs/api.md#headers): 1 to 256 printable ASCII characters; the server refuses anything else. */
export const NONCE_VALUE = /^[\x20-\x7e]{1,256}$/;
