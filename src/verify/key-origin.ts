/**
 * `attestation.key_origin`: where each private key the binding names came from. A key made in the enclave, or sealed to
 * it by the TEE, is one the operator never held; a key loaded from a file is one the operator may have planted or
 * copied, so receipts signed with it prove nothing about the enclave unless the auditor's reference values accept that.
 */
import { fail, pass } from './check.ts';
import type { Check } from './check.ts';

const KEY_NAMES = { receipt: 'receipt signing key', tls: 'TLS key', hpke: 'encrypted-body (HPKE) key', log: 'transparency-log key' } as const;
const ROOT_KEYS: Readonly<Record<string, string>> = {
  vcek: "the chip's own key (VCEK)",
  vmrk: "the VM's root key (VMRK), which only the guest's migration agent carries between chips",
};
const SEALED_FIELDS: Readonly<Record<string, string>> = {
  measurement: 'launch measurement',
  policy: 'guest policy',
  image_id: 'image ID',
  family_id: 'family ID',
};

/**
 * `sev-snp:<root key>:<field>+<field>...` in plain words, or a problem. A key not bound to the measurement is refused:
 * any guest on the same chip, whatever code it runs, could derive it.
 */
function describeSealing(boundTo: string, tee: string | undefined): { words: string } | { problem: string } {
  const [scheme, root, fields = '', ...rest] = boundTo.split(':');
  const names = fields.split('+');
  if (scheme !== 'sev-snp' || rest.length > 0 || ROOT_KEYS[root ?? ''] === undefined || names.some((f) => SEALED_FIELDS[f] === undefined)) {
    return { problem: `is declared sealed to ${JSON.stringify(boundTo)}, a binding this verifier does not know` };
  }
  if (tee !== undefined && tee !== 'sev-snp') return { problem: `is declared sealed by the SEV-SNP firmware, but the evidence is ${tee}` };
  if (!names.includes('measurement'))
    return { problem: `is sealed to ${boundTo}, which leaves out the launch measurement, so any guest on that chip could derive it` };
  const values = names.map((f) => SEALED_FIELDS[f]!);
  const listed = values.length === 1 ? values[0]! : `${values.slice(0, -1).join(', ')} and ${values.at(-1)!}`;
  return {
    words: `the AMD SEV-SNP firmware derives it from ${ROOT_KEYS[root!]!} and this guest's ${listed}, so only a guest launched with the same values can have it`,
  };
}

/** The binding's `key_origin`, checked; `acceptLoaded` comes from the reference values (default false); `tee` is the evidence's. */
export function keyOriginCheck(keyOrigin: unknown, acceptLoaded = false, tee?: string): Check {
  if (typeof keyOrigin !== 'object' || keyOrigin === null || Array.isArray(keyOrigin)) {
    return fail(
      'attestation.key_origin',
      'the binding does not say where its keys came from, so an operator-planted key cannot be told from one made in the enclave',
    );
  }
  const k = keyOrigin as Record<string, unknown>;
  const made: string[] = [];
  const loaded: string[] = [];
  const problems: string[] = [];
  for (const [name, label] of Object.entries(KEY_NAMES)) {
    const entry = k[name] as Record<string, unknown> | null | undefined;
    if (entry === null && name !== 'receipt') continue;
    // The transparency-log key is declared only by a service that keeps a log (docs/log.md).
    if (entry === undefined && name === 'log') continue;
    if (typeof entry !== 'object' || entry === null) {
      problems.push(`the ${label} has no declared origin`);
      continue;
    }
    if (entry.origin === 'generated') made.push(`the ${label} was made inside the enclave`);
    else if (entry.origin === 'sealed' && typeof entry.bound_to === 'string') {
      const sealing = describeSealing(entry.bound_to, tee);
      if ('problem' in sealing) problems.push(`the ${label} ${sealing.problem}`);
      else made.push(`the ${label} is sealed to the enclave: ${sealing.words}`);
    } else if (entry.origin === 'loaded') loaded.push(`the ${label} was loaded from ${typeof entry.file === 'string' ? entry.file : 'a file'}`);
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
