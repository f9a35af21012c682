import * as asn1js from 'asn1js';
import type { X509Certificate } from 'node:crypto';
import { EvidenceError } from '../errors.ts';

/** Intel SGX PCK certificate extension (Intel SGX PCK Certificate and CRL Profile, 1.3.5). */
const SGX_EXTENSION_OID = '1.2.840.113741.1.13.1';

export interface PckExtension {
  /** The Platform Provisioning ID (16 bytes): Intel's identifier of the processor package or platform the key belongs to. */
  ppid: string;
  /** The platform instance id (16 bytes), present only in certificates of the PCK Platform CA (multi-package platforms). */
  platformInstanceId?: string;
  /** The platform's family-model-stepping-platform id (6 bytes), which selects the TCB info. */
  fmspc: string;
  pceId: string;
  /** SGX TCB component SVNs 1-16. */
  compSvn: number[];
  pceSvn: number;
  cpuSvn: string;
}

function children(node: asn1js.AsnType): asn1js.AsnType[] {
  return node instanceof asn1js.Sequence ? (node.valueBlock.value as asn1js.AsnType[]) : [];
}

/** The {OID, value} pairs of an SGX extension SEQUENCE, by OID. */
function members(node: asn1js.AsnType): Map<string, asn1js.AsnType> {
  const out = new Map<string, asn1js.AsnType>();
  for (const pair of children(node)) {
    const [oid, value] = children(pair);
    if (oid instanceof asn1js.ObjectIdentifier && value !== undefined) out.set(oid.valueBlock.toString(), value);
  }
  return out;
}

function integer(node: asn1js.AsnType | undefined, what: string): number {
  if (!(node instanceof asn1js.Integer)) throw new EvidenceError('ERR_COLLATERAL', `PCK certificate: ${what} is not an INTEGER`);
  return node.valueBlock.valueDec;
}

function octets(node: asn1js.AsnType | undefined, what: string): string {
  if (!(node instanceof asn1js.OctetString)) throw new EvidenceError('ERR_COLLATERAL', `PCK certificate: ${what} is not an OCTET STRING`);
  return Buffer.from(node.valueBlock.valueHexView).toString('hex');
}

/** Finds the extension's DER value in the certificate: node's X509Certificate does not expose extensions. */
function extensionValue(cert: X509Certificate): Uint8Array {
  const parsed = asn1js.fromBER(Uint8Array.from(cert.raw));
  const tbs = children(parsed.result)[0];
  const tagged = tbs === undefined ? [] : children(tbs).filter((n) => n.idBlock.tagClass === 3 && n.idBlock.tagNumber === 3);
  const extensions = tagged[0] === undefined ? undefined : (tagged[0] as asn1js.Constructed).valueBlock.value[0];
  for (const ext of extensions === undefined ? [] : children(extensions)) {
    const parts = children(ext);
    const oid = parts[0];
    const value = parts[parts.length - 1];
    if (oid instanceof asn1js.ObjectIdentifier && oid.valueBlock.toString() === SGX_EXTENSION_OID && value instanceof asn1js.OctetString) {
      return new Uint8Array(value.valueBlock.valueHexView);
    }
  }
  throw new EvidenceError('ERR_COLLATERAL', 'the PCK certificate has no Intel SGX extension (1.2.840.113741.1.13.1)');
}

export function readPckExtension(cert: X509Certificate): PckExtension {
  const root = members(asn1js.fromBER(extensionValue(cert)).result);
  const tcb = members(root.get(`${SGX_EXTENSION_OID}.2`) ?? new asn1js.Null());
  const compSvn = Array.from({ length: 16 }, (_, i) => integer(tcb.get(`${SGX_EXTENSION_OID}.2.${i + 1}`), `SGX TCB component ${i + 1}`));
  const instance = root.get(`${SGX_EXTENSION_OID}.6`);
  return {
    ppid: octets(root.get(`${SGX_EXTENSION_OID}.1`), 'PPID'),
    ...(instance === undefined ? {} : { platformInstanceId: octets(instance, 'platform instance id') }),
    fmspc: octets(root.get(`${SGX_EXTENSION_OID}.4`), 'FMSPC'),
    pceId: octets(root.get(`${SGX_EXTENSION_OID}.3`), 'PCE-ID'),
    compSvn,
    pceSvn: integer(tcb.get(`${SGX_EXTENSION_OID}.2.17`), 'PCESVN'),
    cpuSvn: octets(tcb.get(`${SGX_EXTENSION_OID}.2.18`), 'CPUSVN'),
  };
}
