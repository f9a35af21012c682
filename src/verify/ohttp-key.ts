import { fail, pass, type Check } from './check.ts';

/** `/.well-known/ohttp-gateway` as a verifier found it: the bytes served, why they could not be read, or no gateway at all (404). */
export type ServedOhttpKeys = Uint8Array | Error | 'not served';

/** The `application/ohttp-keys` list (RFC 9540) holding exactly the one bound configuration: its two-byte length, then its bytes. */
function boundKeyList(attested: string): Buffer {
  const config = Buffer.from(attested, 'base64');
  const length = Buffer.alloc(2);
  length.writeUInt16BE(config.length);
  return Buffer.concat([length, config]);
}

/**
 * `attestation.ohttp_key` (docs/ohttp.md, "Checking the gateway key"): the key list the Oblivious HTTP gateway serves
 * is, byte for byte, the one configuration the enclave binds as `hpke_key_config`, so a request sealed to it through a
 * relay opens only inside the enclave. Undefined for a service that serves no gateway: nothing to check, and not a pass.
 */
export function ohttpKeyCheck(served: ServedOhttpKeys, attested: string | null): Check | undefined {
  if (served === 'not served') return undefined;
  if (served instanceof Error)
    return fail(
      'attestation.ohttp_key',
      `the service answers at /.well-known/ohttp-gateway but its key could not be read (${served.message}), so it cannot be compared with the one the enclave binds`,
    );
  const servedBase64 = Buffer.from(served).toString('base64');
  if (attested === null)
    return fail(
      'attestation.ohttp_key',
      `the service serves an Oblivious HTTP gateway key (${servedBase64}) but its attestation binds none (hpke_key_config is null): nothing says a request sealed to it opens only inside the enclave`,
    );
  return Buffer.from(served).equals(boundKeyList(attested))
    ? pass(
        'attestation.ohttp_key',
        'the key served at /.well-known/ohttp-gateway is the one the enclave binds as hpke_key_config: a request sealed to it and sent through a relay opens only inside the enclave',
      )
    : fail(
        'attestation.ohttp_key',
        `the key served at /.well-known/ohttp-gateway (${servedBase64}) is not the one the enclave binds as hpke_key_config: a request sealed to it and sent through a relay could be opened outside the enclave, so do not use this gateway`,
      );
}

/**
 * What a verifier tells a user about a service that serves no Oblivious HTTP gateway: said plainly, not as a failure
 * (the gateway is an operator's choice, off with encrypted bodies), and not as a pass (there is nothing to check).
 */
export const NO_OHTTP_NOTE =
  'this service offers no Oblivious HTTP gateway (/.well-known/ohttp-gateway answers 404): requests reach it only directly, ' +
  'so its operator sees which address sends each one (docs/ohttp.md)';

/** The same, within `sigil verify`'s one-line verdict. */
export const NO_OHTTP_SHORT = 'the service offers no Oblivious HTTP gateway (docs/ohttp.md)';
