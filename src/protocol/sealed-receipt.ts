import { RECEIPT_COMMENT_MARKER, readReceiptComment, writeReceiptComment } from './receipt-comment.ts';

/**
 * Receipts of encrypted (EHBP) exchanges travel sealed, never in clear headers (docs/ehbp.md, "Receipts
 * under EHBP"). The server, the attested client and the trust page share these definitions.
 */

/** The HPKE exporter label of an exchange's receipt nonce: the client and the enclave derive the same value. */
export const RECEIPT_NONCE_LABEL = new TextEncoder().encode('sigil receipt nonce');
export const RECEIPT_NONCE_BYTES = 32;

/** Either end of an HPKE context (the `hpke` package's SenderContext or RecipientContext). */
export interface HpkeExporter {
  Export(exporterContext: Uint8Array, length: number): Promise<Uint8Array | ArrayBuffer>;
}

/**
 * The nonce a sealed exchange's receipts carry when the client sent none in the clear: 32 bytes exported
 * from the request's HPKE context, as lowercase hex. Fresh for every request (the client's ephemeral key
 * makes the context) and known only to the client and the enclave, so nothing links it to the wire.
 */
export async function exchangeReceiptNonce(context: HpkeExporter): Promise<string> {
  const bytes = new Uint8Array(await context.Export(RECEIPT_NONCE_LABEL, RECEIPT_NONCE_BYTES));
  let hex = '';
  for (const b of bytes) hex += HEX_BYTE[b];
  return hex;
}

/** Once per sealed request on the server, and in browsers (no Buffer): a table, not a map and join per byte. */
const HEX_BYTE = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'));

/**
 * The receipt comment that ends a response (src/protocol/receipt-comment.ts). A sealed JSON response sends it as its
 * last frame.
 */
export const receiptTrailer = writeReceiptComment;

function lastIndexOf(bytes: Uint8Array, needle: Uint8Array): number {
  outer: for (let at = bytes.length - needle.length; at >= 0; at--) {
    for (let i = 0; i < needle.length; i++) if (bytes[at + i] !== needle[i]) continue outer;
    return at;
  }
  return -1;
}

/**
 * Splits the opened body of a sealed JSON response into the engine's bytes (what `response_hash` covers), the
 * receipt of the trailer after them and its leaf index when the trailer names one; undefined when the body does not
 * end with one trailer (a JWS holds neither ':' nor ' ', so the last marker is the trailer's).
 */
export function splitSealedJson(bytes: Uint8Array): { body: Uint8Array; receipt: string; logIndex?: number } | undefined {
  const start = lastIndexOf(bytes, RECEIPT_COMMENT_MARKER);
  if (start < 0) return undefined;
  const trailer = readReceiptComment(bytes.subarray(start));
  // Sigil writes the trailer with LF line ends and its blank line; nothing else is one.
  if (trailer === undefined || !trailer.blankLine || !trailer.lfOnly) return undefined;
  const split: { body: Uint8Array; receipt: string; logIndex?: number } = { body: bytes.slice(0, start), receipt: trailer.receipt };
  if (trailer.logIndex !== undefined) split.logIndex = trailer.logIndex;
  return split;
}
