import { X509Certificate } from 'node:crypto';
import { AsnConvert } from '@peculiar/asn1-schema';
import { Certificate } from '@peculiar/asn1-x509';
import * as asn1js from 'asn1js';
import { GpuEvidenceError } from './errors.ts';

const PEM_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;
/** TCG DICE TcbInfo (tcg-dice-TcbInfo): where NVIDIA's device certificate carries the firmware identity. */
export const TCG_DICE_TCB_INFO_OID = '2.23.133.5.4.1';
const SHA384_OID = '2.16.840.1.101.3.4.2.2';

/** The certificates of a PEM bundle as NVML returns it (leaf first), each parsed. */
export function readDeviceCertificates(pem: string): X509Certificate[] {
  const blocks = pem.match(PEM_BLOCK) ?? [];
  if (blocks.length === 0) throw new GpuEvidenceError('ERR_GPU_CERTIFICATE', 'the certificate chain holds no PEM certificate');
  return blocks.map((block, i) => {
    try {
      return new X509Certificate(block);
    } catch (err) {
      throw new GpuEvidenceError('ERR_GPU_CERTIFICATE', `certificate ${i} of the chain is not a valid X.509 certificate: ${(err as Error).message}`);
    }
  });
}

function findSha384Fwid(node: asn1js.AsnType): Uint8Array | null {
  if (node instanceof asn1js.Sequence) {
    const [first, second] = node.valueBlock.value;
    if (first instanceof asn1js.ObjectIdentifier && first.valueBlock.toString() === SHA384_OID && second instanceof asn1js.OctetString) {
      return new Uint8Array(second.valueBlock.valueHexView);
    }
  }
  if (node instanceof asn1js.Constructed || node instanceof asn1js.Sequence) {
    for (const child of (node as asn1js.Constructed).valueBlock.value) {
      const found = findSha384Fwid(child);
      if (found !== null) return found;
    }
  }
  return null;
}

/**
 * The SHA-384 FWID in a certificate's TCG DICE TcbInfo extension: the FWID ::= SEQUENCE { hashAlg, digest }
 * with hashAlg SHA-384, wherever the extension nests it (NVIDIA's layout differs from the TCG's tagged one).
 * Null when the certificate has no such extension.
 */
export function certificateFwid(cert: X509Certificate): Uint8Array | null {
  let extensionValue: ArrayBuffer | undefined;
  try {
    const parsed = AsnConvert.parse(cert.raw, Certificate);
    extensionValue = parsed.tbsCertificate.extensions?.find((e) => e.extnID === TCG_DICE_TCB_INFO_OID)?.extnValue.buffer;
  } catch (err) {
    throw new GpuEvidenceError('ERR_GPU_CERTIFICATE', `the device certificate's extensions cannot be read: ${(err as Error).message}`);
  }
  if (extensionValue === undefined) return null;
  const decoded = asn1js.fromBER(extensionValue);
  if (decoded.offset === -1) throw new GpuEvidenceError('ERR_GPU_CERTIFICATE', `the TcbInfo extension is not valid DER: ${decoded.result.error}`);
  return findSha384Fwid(decoded.result);
}
