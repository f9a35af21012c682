import { createPrivateKey, createPublicKey, sign } from 'node:crypto';
import { bundleToJSON, toDSSEBundle } from '@sigstore/bundle';
import { dsse } from '@sigstore/core';
import { IN_TOTO_PAYLOAD_TYPE, type ReleaseStatement } from './manifest.ts';
import { publicKeyHint } from './trust.ts';
import { ReleaseError } from './errors.ts';

/**
 * Signs a release statement with a local P-256 key: a Sigstore bundle (v0.3) holding a DSSE envelope and a
 * public-key hint instead of a certificate, with no transparency-log entry. A verifier accepts it only with the
 * matching public key pinned (docs/release.md).
 */
export function signReleaseWithKey(statement: ReleaseStatement, privateKeyPem: string): string {
  const key = createPrivateKey(privateKeyPem);
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new ReleaseError(
      'ERR_RELEASE_SIGNING_KEY',
      'the release signing key must be an EC P-256 private key (PEM), e.g. from `openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt`',
    );
  }
  const publicPem = createPublicKey(key).export({ type: 'spki', format: 'pem' }).toString();
  const payload = Buffer.from(JSON.stringify(statement), 'utf8');
  const signature = sign('sha256', dsse.preAuthEncoding(IN_TOTO_PAYLOAD_TYPE, payload), { key, dsaEncoding: 'der' });
  const bundle = toDSSEBundle({ artifact: payload, artifactType: IN_TOTO_PAYLOAD_TYPE, signature, keyHint: publicKeyHint(publicPem) });
  return `${JSON.stringify(bundleToJSON(bundle), null, 2)}\n`;
}
