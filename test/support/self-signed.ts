import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/**
 * A P-256 key and a self-signed certificate for `localhost`, made by openssl as an operator would make one:
 * `key.pem` and `cert.pem` in `dir`. `loopbackIp` adds 127.0.0.1 to the names it is valid for.
 */
export function selfSignedLocalhost(dir: string, options: { days: number; loopbackIp?: boolean }): { keyFile: string; certFile: string } {
  const keyFile = join(dir, 'key.pem');
  const certFile = join(dir, 'cert.pem');
  execFileSync(
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
      String(options.days),
      '-subj',
      '/CN=localhost',
      '-addext',
      options.loopbackIp === true ? 'subjectAltName=DNS:localhost,IP:127.0.0.1' : 'subjectAltName=DNS:localhost',
    ],
    { stdio: 'pipe' },
  );
  return { keyFile, certFile };
}
