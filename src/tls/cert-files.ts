import { readFileSync } from 'node:fs';
import { TlsError, tlsCredentials, type TlsCredentials } from './credentials.ts';

function readPem(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new TlsError(`tls.${what}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

/** `tls.mode: files`: the operator's certificate chain and key (a key sealed to this enclave), checked before listening. */
export function readCertificateFiles(certFile: string, keyFile: string, now = new Date()): TlsCredentials {
  return tlsCredentials(readPem(keyFile, 'key_file'), readPem(certFile, 'cert_file'), now, `tls.cert_file ${certFile}`);
}
