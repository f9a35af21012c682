import { createHash, createPrivateKey, createPublicKey, X509Certificate, type KeyObject } from 'node:crypto';
import { SigilError } from '../protocol/sigil-error.ts';

/** A start problem with TLS: a missing or expired certificate, a key that does not match, an ACME server that refused. */
export class TlsError extends SigilError<'ERR_TLS'> {
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_TLS', message, options);
  }
}

/** What the listener serves: the key (PEM, kept in memory only), the certificate chain, and the key's attested hash. */
export interface TlsCredentials {
  /** PKCS#8 PEM of the private key; never written to disk or logs by Sigil. */
  key: string;
  /** PEM certificate chain, leaf first. */
  cert: string;
  /** Lowercase hex SHA-256 of the DER SubjectPublicKeyInfo of the served key: `binding.tls_spki_sha256` (docs/attestation.md#the-binding). */
  spkiSha256: string;
  /** The leaf certificate's end of validity. */
  notAfter: Date;
  /** The leaf certificate's serial number (hex), to tell renewed certificates apart in logs. */
  serial: string;
}

/** Lowercase hex SHA-256 of a public key's DER SubjectPublicKeyInfo: what the binding states and clients pin. */
export function spkiSha256(key: KeyObject): string {
  const publicKey = key.type === 'private' ? createPublicKey(key) : key;
  return createHash('sha256')
    .update(publicKey.export({ type: 'spki', format: 'der' }))
    .digest('hex');
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/** Pairs a private key with a PEM chain, refusing a chain whose leaf is for another key or is not valid at `now`. */
export function tlsCredentials(keyPem: string, chainPem: string, now = new Date(), where = 'the certificate'): TlsCredentials {
  let key: KeyObject;
  try {
    key = createPrivateKey(keyPem);
  } catch {
    throw new TlsError(`${where}: the private key is not a PEM private key`);
  }
  const pems = chainPem.match(PEM_CERTIFICATE);
  if (pems === null) throw new TlsError(`${where}: no PEM certificate found`);
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(pems[0]!);
  } catch {
    throw new TlsError(`${where}: the first certificate cannot be read`);
  }
  if (!leaf.checkPrivateKey(key)) throw new TlsError(`${where}: the certificate is for another key than the private key given`);
  const notBefore = new Date(leaf.validFrom);
  const notAfter = new Date(leaf.validTo);
  if (notAfter <= now) throw new TlsError(`${where}: the certificate expired on ${notAfter.toISOString()}`);
  if (notBefore > now) throw new TlsError(`${where}: the certificate is not valid before ${notBefore.toISOString()}`);
  return {
    key: key.export({ type: 'pkcs8', format: 'pem' }) as string,
    cert: pems.join('\n') + '\n',
    spkiSha256: spkiSha256(key),
    notAfter,
    serial: leaf.serialNumber.toLowerCase(),
  };
}
