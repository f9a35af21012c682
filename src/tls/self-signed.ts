import 'reflect-metadata';
import { KeyObject, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { tlsCredentials, type TlsCredentials } from './credentials.ts';

const P256_ECDSA = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const VALIDITY_DAYS = 397;

/**
 * `tls.mode: self-signed`: a P-256 key and a certificate for it made in this process at every start
 * (docs/tls.md#tlsmode). Clients trust it by pinning the attested SPKI hash, not through a CA.
 */
export async function makeSelfSignedCredentials(hostnames: readonly string[], now = new Date()): Promise<TlsCredentials> {
  const names = hostnames.length > 0 ? hostnames : ['localhost'];
  const keys = (await webcrypto.subtle.generateKey(P256_ECDSA, true, ['sign', 'verify'])) as CryptoKeyPair;
  const notBefore = new Date(now.getTime() - 60_000);
  const certificate = await x509.X509CertificateGenerator.createSelfSigned(
    {
      serialNumber: Buffer.from(webcrypto.getRandomValues(new Uint8Array(16)))
        .toString('hex')
        .replace(/^[89a-f]/, '1'),
      name: `CN=${names[0]}`,
      notBefore,
      notAfter: new Date(notBefore.getTime() + VALIDITY_DAYS * 86_400_000),
      signingAlgorithm: P256_ECDSA,
      keys,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
        new x509.SubjectAlternativeNameExtension(names.map((value) => ({ type: 'dns' as const, value }))),
      ],
    },
    webcrypto as unknown as Crypto,
  );
  const keyPem = KeyObject.from(keys.privateKey).export({ type: 'pkcs8', format: 'pem' }) as string;
  return tlsCredentials(keyPem, certificate.toString('pem'), now, 'the self-signed certificate');
}
