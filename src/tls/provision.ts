import type { LoadedConfig } from '../config/load.ts';
import type { KeyOrigin } from '../protocol/attestation.ts';
import type { Logger } from '../logger/logger.ts';
import { obtainAcmeCertificates } from './acme.ts';
import { readCertificateFiles } from './cert-files.ts';
import type { TlsCredentials } from './credentials.ts';
import { makeSelfSignedCredentials } from './self-signed.ts';

/** The TLS a listener serves: its credentials now, and how it learns of a renewed certificate (same key). */
export interface ServedTls {
  readonly mode: 'self-signed' | 'acme' | 'files';
  readonly current: TlsCredentials;
  /** Where the TLS private key came from, as the binding declares it: made here, or read from the operator's file. */
  readonly keyOrigin: KeyOrigin;
  onRenewed(listener: (credentials: TlsCredentials) => void): void;
  /** The http-01 challenge listener's port in acme mode. */
  readonly challengePort?: number;
  close(): Promise<void>;
}

function fixed(mode: ServedTls['mode'], credentials: TlsCredentials, keyOrigin: KeyOrigin): ServedTls {
  return { mode, current: credentials, keyOrigin, onRenewed: () => undefined, close: async () => undefined };
}

/** Makes or loads the TLS key and certificate `tls.mode` asks for (docs/tls.md#tlsmode); undefined for `off`. */
export async function provisionTls(config: LoadedConfig, logger: Logger): Promise<ServedTls | undefined> {
  const { tls } = config;
  switch (tls.mode) {
    case 'off':
      return undefined;
    case 'self-signed':
      return fixed('self-signed', await makeSelfSignedCredentials(tls.hostnames), { origin: 'generated' });
    case 'files':
      return fixed('files', readCertificateFiles(tls.cert_file!, tls.key_file!), { origin: 'loaded', file: tls.key_file! });
    case 'acme': {
      const certificates = await obtainAcmeCertificates(tls.acme!, tls.hostnames, logger);
      return {
        mode: 'acme',
        keyOrigin: { origin: 'generated' },
        get current() {
          return certificates.current;
        },
        challengePort: certificates.challengePort,
        onRenewed: (listener) => certificates.onRenewed(listener),
        close: () => certificates.close(),
      };
    }
  }
}
