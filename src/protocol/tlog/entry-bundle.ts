import { TlogError } from './errors.ts';

/** Each entry of Sigil's log is the SHA-256 of one receipt's compact JWS: 32 bytes, a 2-byte length prefix in entry bundles. */
export const ENTRY_BYTES = 32;

/** Parses an entry bundle into its entries, each of which must be 32 bytes here. */
export function parseEntryBundle(bytes: Buffer): Buffer[] {
  const entries: Buffer[] = [];
  for (let at = 0; at < bytes.length;) {
    if (at + 2 > bytes.length) throw new TlogError('ERR_TLOG_TILE', 'an entry bundle ends inside a length prefix');
    const length = bytes.readUInt16BE(at);
    if (length !== ENTRY_BYTES || at + 2 + length > bytes.length)
      throw new TlogError('ERR_TLOG_TILE', `an entry of ${length} bytes: every entry here is a 32-byte receipt hash`);
    entries.push(bytes.subarray(at + 2, at + 2 + length));
    at += 2 + length;
  }
  return entries;
}
