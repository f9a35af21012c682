import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { X509Certificate } from 'node:crypto';
import { readPemCertificates } from '../certificate-chain.ts';
import { CollateralAnswerError } from './fetch-error.ts';

/**
 * Whether an answer is the kind of file its URL serves, before it is written to the bundle: a mirror's error page, a
 * truncated file or another file is refused here, naming the file and the URL, rather than failing later as a verdict.
 * Nothing here is trusted: the verifier checks every signature when it reads the bundle.
 */
const refuse = (file: string, url: string, expected: string) =>
  new CollateralAnswerError(`${file}: ${url} answered something that is not ${expected}; the bundle was not written`);

/** A DER (or PEM) X.509 certificate, such as AMD's VCEK. */
export function expectCertificate(body: Uint8Array, file: string, url: string): Uint8Array {
  try {
    new X509Certificate(Buffer.from(body));
  } catch {
    throw refuse(file, url, 'an X.509 certificate');
  }
  return body;
}

/** A CRL, DER or PEM. */
export function expectCrl(body: Uint8Array, file: string, url: string): Uint8Array {
  try {
    const text = Buffer.from(body).toString('latin1');
    new x509.X509Crl(text.includes('-----BEGIN') ? text : Uint8Array.from(body));
  } catch {
    throw refuse(file, url, 'a certificate revocation list');
  }
  return body;
}

/** PEM text holding a chain of at least two certificates (an intermediate and its root). */
export function expectPemChain(pem: string, file: string, url: string): string {
  let count = 0;
  try {
    count = readPemCertificates(pem, file).length;
  } catch {
    count = 0;
  }
  if (count < 2) throw refuse(file, url, 'a PEM chain of two certificates');
  return pem;
}

/** Intel PCS's signed JSON: an object with the signed member (`tcbInfo`, `enclaveIdentity`) and a `signature`. */
export function expectSignedJson(body: Uint8Array, member: string, file: string, url: string): Uint8Array {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(body).toString('utf8'));
  } catch {
    throw refuse(file, url, `Intel's signed JSON (${member} and signature)`);
  }
  const object = value as Record<string, unknown> | null;
  if (typeof object !== 'object' || object === null || typeof object[member] !== 'object' || typeof object.signature !== 'string')
    throw refuse(file, url, `Intel's signed JSON (${member} and signature)`);
  return body;
}
