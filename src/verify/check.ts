/**
 * One line of a verification report: a named check, what it compared, and its outcome.
 *
 * Four outcomes, never confused (docs/auditing.md, "What a verdict means"):
 * - passed: `ok: true` — something was compared and matched;
 * - failed: `ok: false` — compared and did not match, or could not be compared;
 * - not pinned: `ok: true, pinned: false` (from `notPinned`) — measured but compared with nothing;
 * - waived: `ok: false, waived: reason` (from `waive`) — the caller chose not to hold the service to it.
 * Only `verdictOf` turns checks into a verdict; neither a waived nor a not-pinned check counts as passed.
 */
export interface Check {
  /** Stable identifier, e.g. `receipt.signature`, `snp.vcek_chain`; declared in `registry.ts`. */
  name: string;
  ok: boolean;
  /** One human sentence: what was compared, or why it failed. */
  detail: string;
  /** Present and false only for a value nobody pinned: nothing was compared (see `notPinned`). */
  pinned?: false;
  /** Present only for a check the caller waived: the reason the caller gave (see `waive`). */
  waived?: string;
}

export function pass(name: string, detail: string): Check {
  return { name, ok: true, detail };
}

export function fail(name: string, detail: string): Check {
  return { name, ok: false, detail };
}

/** A value that was measured but not compared with anything, because no reference value pins it. */
export function notPinned(name: string, detail: string): Check {
  return { name, ok: true, detail, pinned: false };
}

/**
 * The caller gives up `check` for `reason`. A waived check keeps `ok: false`, so code that knows nothing of
 * waivers fails closed; `verdictOf` lists it as a waiver instead of a failure.
 */
export function waive(check: Check, reason: string): Check {
  return { name: check.name, ok: false, detail: check.detail, waived: reason };
}

export function isNotPinned(check: Check): boolean {
  return check.pinned === false && check.waived === undefined;
}

export function isWaived(check: Check): boolean {
  return check.waived !== undefined;
}

export type CheckMark = 'PASS' | 'FAIL' | '----' | 'WAIVED';

/** The word a text report puts before a check: PASS, FAIL, ---- for a value nobody pinned, WAIVED for a check the caller gave up. */
export function checkMark(check: Check): CheckMark {
  if (isWaived(check)) return 'WAIVED';
  if (!check.ok) return 'FAIL';
  return isNotPinned(check) ? '----' : 'PASS';
}

/** The three verdicts: everything compared and matched; everything else waived, each listed; or not verified. */
export type VerdictOutcome = 'verified' | 'verified-with-waivers' | 'not-verified';

export interface Verdict {
  outcome: VerdictOutcome;
  /** Checks that compared something and matched. */
  passed: number;
  failed: Check[];
  /** Values compared with nothing: each keeps the verdict at not-verified until pinned or waived. */
  notPinned: Check[];
  waived: Check[];
  /** One sentence for a person: the outcome and the counts behind it. */
  summary: string;
}

/**
 * The verdict on a list of checks, failing closed: any failure or any value nobody pinned makes it
 * not-verified; waivers give verified-with-waivers; no checks at all is not-verified.
 */
export function verdictOf(checks: readonly Check[]): Verdict {
  const waived = checks.filter(isWaived);
  const failed = checks.filter((c) => !c.ok && !isWaived(c));
  const unpinned = checks.filter(isNotPinned);
  const passed = checks.filter((c) => c.ok && !isNotPinned(c)).length;
  const waivers = waived.length === 0 ? '' : `; ${waived.length} waived (${waived.map((c) => c.name).join(', ')})`;
  const open = unpinned.length === 0 ? '' : `; ${unpinned.length} not pinned, so compared with nothing (${unpinned.map((c) => c.name).join(', ')})`;
  if (checks.length === 0) return { outcome: 'not-verified', passed, failed, notPinned: unpinned, waived, summary: 'NOT VERIFIED: no check was made' };
  if (failed.length > 0 || unpinned.length > 0) {
    const lead = failed.length > 0 ? `${failed.length} of ${checks.length} checks failed` : `${passed} checks passed`;
    return { outcome: 'not-verified', passed, failed, notPinned: unpinned, waived, summary: `NOT VERIFIED: ${lead}${open}${waivers}` };
  }
  if (waived.length > 0)
    return {
      outcome: 'verified-with-waivers',
      passed,
      failed,
      notPinned: unpinned,
      waived,
      summary: `verified with waivers: ${passed} checks passed${waivers}`,
    };
  return { outcome: 'verified', passed, failed, notPinned: unpinned, waived, summary: `verified: all ${passed} checks passed` };
}
