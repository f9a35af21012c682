import { describeCheck } from '../verify/check-registry.ts';
import { checkMark, isNotPinned, isWaived, verdictOf, type Check } from '../verify/check.ts';

/** The heading a run of checks of one declaration gets: the registry's title, its plain words and where docs/ explains it. */
function heading(name: string): string {
  const declared = describeCheck(name);
  return declared === undefined ? `# ${name}` : `# ${declared.title}: ${declared.explains} (${declared.doc})`;
}

/**
 * The text report every verifying command prints: each run of checks under the registry's title and plain words,
 * one line per check (PASS, FAIL, ---- NOT PINNED, or WAIVED with its reason), then the verdict.
 */
export function formatChecks(checks: readonly Check[]): string {
  const lines: string[] = [];
  let last: string | undefined;
  for (const c of checks) {
    const head = heading(c.name);
    if (head !== last) lines.push(head);
    last = head;
    lines.push(`${checkMark(c)} ${c.name} — ${isNotPinned(c) ? 'NOT PINNED: ' : ''}${c.detail}${isWaived(c) ? ` (waived: ${c.waived})` : ''}`);
  }
  lines.push(verdictSummary(checks));
  return lines.join('\n') + '\n';
}

function verdictSummary(checks: readonly Check[]): string {
  const uncompared = checks.some((c) => c.name === 'reference.values' && (isNotPinned(c) || isWaived(c)));
  return verdictOf(checks).summary + (uncompared ? '; the code was not compared with reference values' : '');
}

/**
 * What `sigil verify` prints by default: the verdict with its counts on one line, pointing to -v when a check did not
 * pass; `shortNotes` (a service that keeps no log) are said within that line.
 */
export function verdictLine(checks: readonly Check[], shortNotes: readonly string[] = []): string {
  const verdict = verdictOf(checks);
  const notes = shortNotes.map((note) => `; note: ${note}`).join('');
  return `${verdictSummary(checks)}${notes}${verdict.outcome === 'verified' ? '' : ' (sigil verify -v lists every check)'}\n`;
}
