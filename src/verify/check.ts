/** One line of a verification report: a named check that passed or failed, and why. */
export interface Check {
  /** Stable identifier, e.g. `receipt.signature`, `snp.vcek_chain`. */
  name: string;
  ok: boolean;
  /** One human sentence: what was compared, or why it failed. */
  detail: string;
}

export function pass(name: string, detail: string): Check {
  return { name, ok: true, detail };
}

export function fail(name: string, detail: string): Check {
  return { name, ok: false, detail };
}
