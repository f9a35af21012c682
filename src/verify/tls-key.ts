import { fail, pass, type Check } from './check.ts';

/**
 * `attestation.tls_key`: the key every connection of this verification presented is the one the binding
 * attests (docs/attestation.md, docs/tls.md). Over plain HTTP there is nothing to compare, and the check says so.
 */
export function tlsBindingCheck(url: URL, presented: readonly string[], attested: string | null): Check {
  if (url.protocol !== 'https:') {
    return fail(
      'attestation.tls_key',
      `the service was reached over plain HTTP (${url.origin}): anyone on the path can read and change the traffic, and no TLS key can be compared with the attested one`,
    );
  }
  if (attested === null) {
    return fail(
      'attestation.tls_key',
      'the enclave attests no TLS key (tls_spki_sha256 is null): TLS ends outside the enclave, so the connection cannot be tied to it',
    );
  }
  const others = presented.filter((k) => k !== attested);
  if (presented.length === 0) return fail('attestation.tls_key', 'no TLS key was seen on the connection');
  if (others.length > 0) {
    return fail(
      'attestation.tls_key',
      `the server presented TLS key sha256:${others[0]} but the enclave attests sha256:${attested}: something between you and the enclave terminates TLS (a man in the middle or a load balancer)`,
    );
  }
  return pass('attestation.tls_key', `the TLS connection presented sha256:${attested}, the key the enclave attests: TLS ends inside the enclave`);
}
