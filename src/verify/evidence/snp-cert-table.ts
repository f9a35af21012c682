import { ByteReader } from './byte-reader.ts';
import { EvidenceError } from './errors.ts';

/**
 * GUIDs of the GHCB certificate table (AMD pub. 56421, "SNP Extended Guest Request"). The bytes are stored
 * in the order the string reads (as AMD's sev-guest tools, virtee/sev and go-sev-guest write them).
 */
export const SNP_CERT_GUID = {
  vcek: '63da758d-e664-4564-adc5-f4b93be8accd',
  vlek: 'a8074bc2-a25a-483e-aae6-39c045a0b8a1',
  ask: '4ab7b379-bbac-4fe4-a02f-05aef327c782',
  ark: 'c0b406a4-a803-4952-9743-3fb6014cd0ae',
  crl: '92f81bc3-5811-4d3d-97ff-d19f88dc67ea',
} as const;

export type SnpCertKind = keyof typeof SNP_CERT_GUID | 'unknown';

export const SNP_CERT_TABLE_ENTRY_SIZE = 24;

export interface SnpCertEntry {
  guid: string;
  kind: SnpCertKind;
  /** DER bytes of the certificate (or CRL). */
  data: Uint8Array;
}

function guidString(bytes: Uint8Array): string {
  const hex = Buffer.from(bytes).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

function kindOf(guid: string): SnpCertKind {
  for (const [kind, value] of Object.entries(SNP_CERT_GUID)) if (value === guid) return kind as SnpCertKind;
  return 'unknown';
}

/** Parses the configfs-tsm `auxblob` of an SNP guest: 24-byte entries {guid, offset, length} ended by a zero entry. */
export function readSnpCertTable(bytes: Uint8Array): SnpCertEntry[] {
  const reader = new ByteReader(bytes, 'ERR_SNP_CERT_TABLE_TRUNCATED', 'SEV-SNP certificate table');
  const raw: Array<{ guid: string; offset: number; length: number }> = [];
  let at = 0;
  for (; ; at += SNP_CERT_TABLE_ENTRY_SIZE) {
    const guidBytes = reader.slice(at, 16);
    const offset = reader.u32(at + 16);
    const length = reader.u32(at + 20);
    if (guidBytes.every((b) => b === 0) && offset === 0 && length === 0) break;
    raw.push({ guid: guidString(guidBytes), offset, length });
  }
  const tableEnd = at + SNP_CERT_TABLE_ENTRY_SIZE;
  const entries: SnpCertEntry[] = [];
  for (const entry of raw) {
    if (entry.offset < tableEnd) {
      throw new EvidenceError('ERR_SNP_CERT_TABLE_MALFORMED', `SEV-SNP certificate table entry ${entry.guid} points inside the table (offset ${entry.offset})`);
    }
    entries.push({ guid: entry.guid, kind: kindOf(entry.guid), data: reader.slice(entry.offset, entry.length) });
  }
  return entries;
}

/** Writes a certificate table (the inverse of readSnpCertTable): entries, a zero entry, then the DER blobs. */
export function encodeSnpCertTable(entries: ReadonlyArray<{ guid: string; der: Uint8Array }>): Uint8Array {
  const tableSize = (entries.length + 1) * SNP_CERT_TABLE_ENTRY_SIZE;
  const out = Buffer.alloc(tableSize + entries.reduce((n, e) => n + e.der.length, 0));
  let dataAt = tableSize;
  entries.forEach((entry, i) => {
    Buffer.from(entry.guid.replace(/-/g, ''), 'hex').copy(out, i * SNP_CERT_TABLE_ENTRY_SIZE);
    out.writeUInt32LE(dataAt, i * SNP_CERT_TABLE_ENTRY_SIZE + 16);
    out.writeUInt32LE(entry.der.length, i * SNP_CERT_TABLE_ENTRY_SIZE + 20);
    Buffer.from(entry.der).copy(out, dataAt);
    dataAt += entry.der.length;
  });
  return new Uint8Array(out);
}
