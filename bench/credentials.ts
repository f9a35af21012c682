/** One P-256 key and a self-signed certificate for `localhost` and 127.0.0.1, made with openssl: the TLS benches give it to every peer. */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export const SERVERNAME = 'localhost';

export interface Credentials {
  certFile: string;
  keyFile: string;
  certPem: string;
  opensslVersion: string;
}

export function makeCredentials(dir: string): Credentials {
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  const r = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      keyFile,
      '-out',
      certFile,
      '-days',
      '2',
      '-subj',
      `/CN=${SERVERNAME}`,
      '-addext',
      `subjectAltName=DNS:${SERVERNAME},IP:127.0.0.1`,
    ],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`openssl could not make the bench key and certificate: ${r.stderr}`);
  const opensslVersion = spawnSync('openssl', ['version'], { encoding: 'utf8' }).stdout.trim();
  return { certFile, keyFile, certPem: readFileSync(certFile, 'utf8'), opensslVersion };
}
