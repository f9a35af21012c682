import { describeCheck } from '../verify/check-registry.ts';

/**
 * What each check means to someone who is not a specialist: its title, and what passing means, in the words
 * of the verifier's one check registry (the same `sigil verify` and the attested client use). The detail
 * line of the check itself says what was compared.
 */
export interface Explanation {
  title: string;
  why: string;
}

/** A name the registry does not declare is shown as itself, with no explanation rather than an invented one. */
export function explain(name: string): Explanation {
  const declared = describeCheck(name);
  return declared === undefined ? { title: name, why: '' } : { title: declared.title, why: declared.explains };
}
