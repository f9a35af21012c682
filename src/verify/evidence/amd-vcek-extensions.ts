import 'reflect-metadata';
import * as x509 from '@peculiar/x509';

/** AMD's VCEK/VLEK certificate extensions (AMD "Versioned Chip Endorsement Key (VCEK) Certificate and KDS Interface Specification", 3.1). */
export const AMD_OID = {
  productName: '1.3.6.1.4.1.3704.1.2',
  bootloader: '1.3.6.1.4.1.3704.1.3.1',
  tee: '1.3.6.1.4.1.3704.1.3.2',
  snp: '1.3.6.1.4.1.3704.1.3.3',
  microcode: '1.3.6.1.4.1.3704.1.3.8',
  fmc: '1.3.6.1.4.1.3704.1.3.9',
  hwid: '1.3.6.1.4.1.3704.1.4',
} as const;

export interface AmdCertificateTcb {
  productName?: string;
  bootloader?: number;
  tee?: number;
  snp?: number;
  microcode?: number;
  fmc?: number;
  /** The chip's CHIP_ID the key belongs to (VCEK only). */
  hwid?: Uint8Array;
}

/** A small non-negative DER INTEGER (tag 0x02), the encoding of each SPL extension. */
function derSmallInteger(value: Uint8Array): number | undefined {
  if (value.length < 3 || value[0] !== 0x02 || value[1] !== value.length - 2 || value[1]! > 4) return undefined;
  let n = 0;
  for (const b of value.subarray(2)) n = n * 256 + b;
  return value[2]! & 0x80 ? undefined : n;
}

/** The hwID extension: KDS serves the 64 bytes raw; some certificates wrap them in an OCTET STRING. */
function hwidBytes(value: Uint8Array): Uint8Array {
  if (value.length === 66 && value[0] === 0x04 && value[1] === 0x40) return value.subarray(2);
  return value;
}

/** Reads the TCB and hwID extensions of a VCEK or VLEK certificate (DER bytes). */
export function readAmdCertificateTcb(der: Uint8Array): AmdCertificateTcb {
  const cert = new x509.X509Certificate(Uint8Array.from(der));
  const raw = (oid: string) => {
    const ext = cert.extensions.find((e) => e.type === oid);
    return ext === undefined ? undefined : new Uint8Array(ext.value);
  };
  const out: AmdCertificateTcb = {};
  for (const part of ['bootloader', 'tee', 'snp', 'microcode', 'fmc'] as const) {
    const value = raw(AMD_OID[part]);
    const n = value === undefined ? undefined : derSmallInteger(value);
    if (n !== undefined) out[part] = n;
  }
  const name = raw(AMD_OID.productName);
  // IA5String (tag 0x16) "Milan-B0", "Genoa-B1", ...
  if (name !== undefined && name[0] === 0x16 && name[1] === name.length - 2) out.productName = Buffer.from(name.subarray(2)).toString('latin1');
  const hwid = raw(AMD_OID.hwid);
  if (hwid !== undefined) out.hwid = hwidBytes(hwid);
  return out;
}
