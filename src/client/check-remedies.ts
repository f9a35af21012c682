import { isNotPinned, isWaived, type Check } from '../verify/check.ts';

/** An option of the attested client that would accept checks that did not pass, and what accepting them gives up. */
export interface Remedy {
  option: 'allowNoTee' | 'allowUnpinnedCode';
  /** The same option on the command line (`sigil verify`, `sigil connect`). */
  flag: '--allow-no-tee' | '--allow-unpinned-code';
  /** Why accepting is a risk, in words for someone who does not read attestation reports. */
  risk: string;
  /** The checks it would accept. */
  checks: string[];
}

const NO_TEE_RISK =
  'the service runs on no hardware enclave, so nothing vouches for its code or keys: anyone who runs a copy can sign the same answers (fine for a development service on your own machine)';
const UNPINNED_RISK =
  'these values were measured but compared with nothing you audited, so the service may run code nobody reviewed (pin them with reference values instead)';

/**
 * Which option would accept each check that neither passed nor was waived, and the checks no option accepts (real
 * failures). On a service without hardware (`attestation.tee` failed), `allowNoTee` covers what it waives: the TEE
 * itself, a plain-HTTP channel and the values no hardware reports; elsewhere a value nobody pinned needs `allowUnpinnedCode`.
 */
export function remediesFor(checks: readonly Check[]): { remedies: Remedy[]; unaccepted: Check[] } {
  const open = checks.filter((c) => (!c.ok && !isWaived(c)) || isNotPinned(c));
  const noTee = open.some((c) => c.name === 'attestation.tee' && !c.ok);
  const byNoTee = noTee ? open.filter((c) => c.name === 'attestation.tee' || c.name === 'attestation.tls_key' || isNotPinned(c)) : [];
  const byUnpinned = noTee ? [] : open.filter(isNotPinned);
  const accepted = new Set([...byNoTee, ...byUnpinned]);
  const remedies: Remedy[] = [];
  if (byNoTee.length > 0) remedies.push({ option: 'allowNoTee', flag: '--allow-no-tee', risk: NO_TEE_RISK, checks: byNoTee.map((c) => c.name) });
  if (byUnpinned.length > 0)
    remedies.push({ option: 'allowUnpinnedCode', flag: '--allow-unpinned-code', risk: UNPINNED_RISK, checks: byUnpinned.map((c) => c.name) });
  return { remedies, unaccepted: open.filter((c) => !accepted.has(c)) };
}

/** One sentence per remedy for an error message, naming the option as a program (`option`) or a person (`flag`) writes it. */
export function describeRemedies(remedies: readonly Remedy[], as: 'option' | 'flag'): string {
  return remedies.map((r) => `${r[as]} would accept ${r.checks.join(', ')}; the risk: ${r.risk}.`).join(' ');
}

/** What the attested client's not-verified error adds: the options that would accept its failed checks, or nothing. */
export function acceptingOptionsNote(checks: readonly Check[]): string {
  const { remedies } = remediesFor(checks);
  return remedies.length === 0 ? '' : `. ${describeRemedies(remedies, 'option')}`;
}
