/**
 * `attestation.key_origin`: where each private key the binding names came from. A key made in the enclave, or sealed to
 * it by the TEE, is one the operator never held; a key loaded from a file is one the operator may have planted or
 * copied, so receipts signed with it prove nothing about the enclave unless the auditor's reference values accept that.
 */
import { fail, pass } from './check.ts';
import type { Check } from './check.ts';

const KEY_NAMES = { receipt: 'receipt signing key', tls: 'TLS key', hpke: 'encrypted-body (HPKE) key' } as const;

/** The binding's `key_origin`, checked; `acceptLoaded` comes from the reference values (default false). */
export function keyOriginCheck(keyOrigin: unknown, acceptLoaded = false): Check {
  if (typeof keyOrigin !== 'object' || keyOrigin === null || Array.isArray(keyOrigin)) {
    return fail('attestation.key_origin', 'the binding does not say where its keys came from, so an operator-planted key cannot be told from one made in the enclave');
  }
  const k = keyOrigin as Record<string, unknown>;
  const made: string[] = [];
  const loaded: string[] = [];
  const problems: string[] = [];
  for (const [name, label] of Object.entries(KEY_NAMES)) {
    const entry = k[name] as Record<string, unknown> | null | undefined;
    if (entry === null && name !== 'receipt') continue;
    if (typeof entry !== 'object' || entry === null) {
      problems.push(`the ${label} has no declared origin`);
      continue;
    }
    if (entry.origin === 'generated') made.push(`the ${label} was made inside the enclave`);
    else if (entry.origin === 'sealed' && typeof entry.bound_to === 'string') made.push(`the ${label} is sealed to the enclave (${entry.bound_to})`);
    else if (entry.origin === 'loaded') loaded.push(`the ${label} was loaded from ${typeof entry.file === 'string' ? entry.file : 'a file'}`);
    else problems.push(`the ${label} has an unknown origin ${JSON.stringify(entry.origin)}`);
  }
  if (problems.length > 0) return fail('attestation.key_origin', `${problems.join('; ')}: the enclave does not vouch that only it holds that key`);
  if (loaded.length > 0 && !acceptLoaded) {
    return fail(
      'attestation.key_origin',
      `${loaded.join('; ')}: a file the operator controls, so the operator may hold the same key and sign or decrypt outside the enclave (accept this only with sigil.accept_loaded_keys in the reference values)`,
    );
  }
  const accepted = loaded.length > 0 ? `; ${loaded.join('; ')}, which the reference values accept` : '';
  return pass('attestation.key_origin', `${made.join('; ') || 'no enclave-made keys'}${accepted}`);
}
