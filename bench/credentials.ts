/** One P-256 key and a self-signed certificate for `localhost` and 127.0.0.1, made with openssl: the TLS benches give it to every peer. */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { selfSignedLocalhost } from '../test/support/self-signed.ts';

export const SERVERNAME = 'localhost';

export interface Credentials {
  certFile: string;
  keyFile: string;
  certPem: string;
  opensslVersion: string;
}

export function makeCredentials(dir: string): Credentials {
  let files: { keyFile: string; certFile: string };
  try {
    files = selfSignedLocalhost(dir, { days: 2, loopbackIp: true });
  } catch (err) {
    throw new Error(`openssl could not make the bench key and certificate: ${(err as { stderr?: Buffer }).stderr?.toString() ?? (err as Error).message}`, {
      cause: err,
    });
  }
  const { certFile, keyFile } = files;
  const opensslVersion = spawnSync('openssl', ['version'], { encoding: 'utf8' }).stdout.trim();
  return { certFile, keyFile, certPem: readFileSync(certFile, 'utf8'), opensslVersion };
}
