import { EvidenceError } from './errors.ts';

const PRINTABLE_TEXT = /^[\x20-\x7e\t\r\n]*$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/**
 * Evidence as a file holds it: hex text (with or without `0x`), base64 text, or raw bytes. Text that is none of
 * these is refused with the reason (an odd digit count, a stray character), never read as bytes of another format,
 * where it would surface as a nonsense version number. `what` names the input in the message.
 */
export function decodeEvidenceText(file: Uint8Array, what: string): Uint8Array {
  const raw = Buffer.from(file.buffer, file.byteOffset, file.byteLength).toString('latin1');
  if (!PRINTABLE_TEXT.test(raw)) return file;
  const text = raw.replace(/\s/g, '');
  if (text.length === 0) throw new EvidenceError('ERR_EVIDENCE_ENCODING', `${what} is empty`);
  const prefixed = /^0[xX]/.test(text);
  const digits = prefixed ? text.slice(2) : text;
  if (/^[0-9a-fA-F]+$/.test(digits)) {
    if (digits.length % 2 === 1) {
      throw new EvidenceError('ERR_EVIDENCE_ENCODING', `${what} is hex text with an odd number of digits (${digits.length}): a digit is missing or extra`);
    }
    return new Uint8Array(Buffer.from(digits, 'hex'));
  }
  if (prefixed) {
    const at = digits.search(/[^0-9a-fA-F]/);
    throw new EvidenceError('ERR_EVIDENCE_ENCODING', `${what} starts with 0x but is not hex: ${JSON.stringify(digits[at])} at digit ${at + 1}`);
  }
  if (text.length % 4 === 0 && BASE64.test(text)) return new Uint8Array(Buffer.from(text, 'base64'));
  throw new EvidenceError('ERR_EVIDENCE_ENCODING', `${what} is text but neither hex nor base64`);
}
