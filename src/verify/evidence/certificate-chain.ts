import { X509Certificate } from 'node:crypto';
import { EvidenceError } from './errors.ts';

const PEM_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/** Reads one certificate, DER bytes or PEM text. */
export function readCertificate(input: Uint8Array | string, what: string): X509Certificate {
  try {
    return new X509Certificate(typeof input === 'string' ? input : Buffer.from(input));
  } catch (err) {
    throw new EvidenceError('ERR_EVIDENCE_CERTIFICATE', `${what} is not a valid X.509 certificate: ${(err as Error).message}`);
  }
}

/** Every certificate of a PEM bundle, in order. */
export function readPemCertificates(pem: string, what: string): X509Certificate[] {
  const blocks = pem.match(PEM_BLOCK) ?? [];
  return blocks.map((block, i) => readCertificate(block, `${what} certificate ${i}`));
}

export function commonName(cert: X509Certificate): string {
  const cn = cert.subject.split('\n').find((line) => line.startsWith('CN='));
  return cn === undefined ? cert.subject.replace(/\n/g, ', ') : cn.slice(3);
}

export function sameCertificate(a: X509Certificate, b: X509Certificate): boolean {
  return a.raw.equals(b.raw);
}

/**
 * Why `child` was not issued by `parent` at `now`, or null when it was: names and key identifiers match
 * (OpenSSL's check_issued), the signature verifies with the parent's key, and the child is within its validity.
 */
export function issuanceProblem(child: X509Certificate, parent: X509Certificate, now: Date): string | null {
  const name = commonName(child);
  if (!child.checkIssued(parent)) return `${name} names a different issuer than ${commonName(parent)}`;
  let signed = false;
  try {
    signed = child.verify(parent.publicKey);
  } catch {
    signed = false;
  }
  if (!signed) return `${name} is not signed by ${commonName(parent)}`;
  const from = new Date(child.validFrom);
  const to = new Date(child.validTo);
  if (now < from || now > to) return `${name} is not valid at ${now.toISOString()} (valid ${from.toISOString()} to ${to.toISOString()})`;
  return null;
}
