import { fail, pass, type Check } from './check.ts';

/**
 * `attestation.hpke_key`: the HPKE key config the service serves is byte for byte the one the enclave binds,
 * so a body sealed to it can be opened only inside the enclave, whatever terminates TLS on the way.
 */
export function hpkeBindingCheck(served: Uint8Array | Error | undefined, attested: string | null): Check {
  if (attested === null)
    return fail('attestation.hpke_key', 'the service offers no encrypted bodies (hpke_key_config is null): bodies are protected only by TLS');
  if (!(served instanceof Uint8Array))
    return fail(
      'attestation.hpke_key',
      `the service binds an HPKE key but /.well-known/hpke-keys could not be read${served === undefined ? '' : ` (${served.message})`}`,
    );
  const servedBase64 = Buffer.from(served).toString('base64');
  return servedBase64 === attested
    ? pass(
        'attestation.hpke_key',
        `the HPKE key served at /.well-known/hpke-keys is the one the enclave binds: bodies sealed to it open only inside the enclave`,
      )
    : fail(
        'attestation.hpke_key',
        `the HPKE key served (${servedBase64}) is not the one the enclave binds (${attested}): a body sealed to it could be read by someone else`,
      );
}
