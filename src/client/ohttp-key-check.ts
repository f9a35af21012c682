import { encodeKeyConfig, parseKeyConfig, type KeyConfig } from '../protocol/ohttp.ts';
import { field } from '../verify/binding.ts';
import { fail, pass, waive, type Check } from '../verify/check.ts';
import { chooseSuite } from './ohttp-encapsulate.ts';

/**
 * `attestation.ohttp_key`: the gateway key the relay served, the one requests are sealed to, is the key the enclave's
 * attestation binds as `hpke_key_config` (docs/ohttp.md, "Clients"). Otherwise whoever served it (the relay, or
 * someone before it) could open every request: nothing but the attestation's own requests was sealed to it.
 */
export function gatewayKeyCheck(offered: readonly KeyConfig[], attestation: unknown): Check {
  const bound = field(field(attestation, 'binding'), 'hpke_key_config');
  if (typeof bound !== 'string')
    return fail(
      'attestation.ohttp_key',
      'the attestation binds no HPKE key (hpke_key_config), so nothing shows that the gateway key the relay served belongs to the enclave',
    );
  let chosen: KeyConfig;
  try {
    chosen = chooseSuite([...offered]).config;
  } catch (err) {
    return fail('attestation.ohttp_key', `the relay served no gateway key this client can seal to: ${(err as Error).message}`);
  }
  if (Buffer.from(bound, 'base64').equals(encodeKeyConfig(chosen)))
    return pass(
      'attestation.ohttp_key',
      `the gateway key the relay served (key ID ${chosen.keyId}) is the HPKE key the enclave's attestation binds: only the enclave can open what is sealed to it`,
    );
  return fail(
    'attestation.ohttp_key',
    `the gateway key the relay served (key ID ${chosen.keyId}) is not the HPKE key the enclave's attestation binds: whoever served it (the relay, or someone before it) could read every request sealed to it, so nothing but the attestation's own requests was sent`,
  );
}

/** The gateway key a verdict whose `attestation.ohttp_key` passed seals to: the one its `hpke_key_config` binds. */
export function boundGatewayKeys(attestation: unknown): KeyConfig[] {
  const bound = field(field(attestation, 'binding'), 'hpke_key_config');
  if (typeof bound !== 'string') throw new TypeError('the verdict binds no HPKE key to seal to');
  return [parseKeyConfig(Buffer.from(bound, 'base64'))];
}

/** The key `keys` would be sealed to, as the binding writes it (base64), to compare with the key a verdict bound. */
export function sealingKeyOf(keys: readonly KeyConfig[]): string {
  return Buffer.from(encodeKeyConfig(chooseSuite([...keys]).config)).toString('base64');
}

const NO_TLS_TO_THE_SERVICE =
  'every request goes through the Oblivious HTTP relay, sealed to the gateway key the attestation binds (attestation.ohttp_key): no connection reaches the service, so there is no TLS key of its to compare';

/**
 * A verdict's checks through a relay: `attestation.ohttp_key` held to the key the relay served, and
 * `attestation.tls_key` waived for the reason that holds (the relay's seal, not TLS, is the channel); a wrong gateway
 * key still fails the verdict on its own check. The same check made on the key the gateway served about itself is
 * dropped: that answer came sealed to the relay's key, so a relay that substituted its key could have re-sealed it.
 */
export function relayedChecks(checks: readonly Check[], offered: readonly KeyConfig[], attestation: unknown): Check[] {
  const tls = (c: Check) => (c.name === 'attestation.tls_key' && !c.ok ? waive(c, NO_TLS_TO_THE_SERVICE) : c);
  const served = (c: Check) => c.name !== 'attestation.ohttp_key';
  return [...checks.filter(served).map(tls), gatewayKeyCheck(offered, attestation)];
}
