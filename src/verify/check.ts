/**
 * One line of a verification report: a named check that passed or failed, and why.
 *
 * A third state exists for reference values (SPEC 10): a value the auditor did not pin is reported with
 * `pinned: false` (made by `notPinned`). It is not a failure, so it does not change the verdict, but it is
 * not a pass either: reports print it as `----` with "NOT PINNED", never as PASS, so nobody mistakes an
 * unchecked value for a checked one.
 */
export interface Check {
  /** Stable identifier, e.g. `receipt.signature`, `snp.vcek_chain`. */
  name: string;
  ok: boolean;
  /** One human sentence: what was compared, or why it failed. */
  detail: string;
  /** Present and false only for a value nobody pinned: nothing was compared (see `notPinned`). */
  pinned?: false;
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

export function isNotPinned(check: Check): boolean {
  return check.pinned === false;
}

/** The word a text report puts before a check: PASS, FAIL, or ---- for a value nobody pinned. */
export function checkMark(check: Check): 'PASS' | 'FAIL' | '----' {
  if (!check.ok) return 'FAIL';
  return isNotPinned(check) ? '----' : 'PASS';
}
