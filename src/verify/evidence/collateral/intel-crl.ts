import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { webcrypto, type X509Certificate } from 'node:crypto';
import { EvidenceError } from '../errors.ts';

/** A CRL as Intel serves it, DER or PEM. */
export function readCrl(bytes: Uint8Array, what: string): x509.X509Crl {
  try {
    const text = Buffer.from(bytes).toString('latin1');
    return new x509.X509Crl(text.includes('-----BEGIN') ? text : Uint8Array.from(bytes));
  } catch (err) {
    throw new EvidenceError('ERR_COLLATERAL', `${what} is not a CRL: ${(err as Error).message}`);
  }
}

/** Whether `issuer`'s key signed the CRL. */
export async function crlSignedBy(crl: x509.X509Crl, issuer: X509Certificate): Promise<boolean> {
  try {
    return await crl.verify({ publicKey: new x509.X509Certificate(Uint8Array.from(issuer.raw)) }, webcrypto as unknown as Crypto);
  } catch {
    return false;
  }
}

/** Serial numbers compare as lowercase hex without leading zeros. */
function serialKey(serial: string): string {
  return serial.toLowerCase().replace(/^0+/, '');
}

/** The CRL's entry for `cert`, when it revokes it. */
export function isRevoked(crl: x509.X509Crl, cert: X509Certificate): x509.X509CrlEntry | undefined {
  return crl.entries.find((e) => serialKey(e.serialNumber) === serialKey(cert.serialNumber));
}
