import type { Verdict } from './check.ts';

/**
 * The sentence a person reads first, read off the core's verdict (the trust page and `sigil connect`'s status
 * page show the same): `development` and `unpinned` are kinds of not-verified that deserve their own sentence
 * (no hardware at all; genuine hardware running code nobody pinned).
 */
export type Headline = 'verified' | 'verified-with-waivers' | 'unpinned' | 'development' | 'failed';

const NO_HARDWARE = new Set(['attestation.tee', 'attestation.tls_key']);

/**
 * Which sentence heads the report: failures outrank everything; a development service's own failures (or waivers,
 * when the caller accepted it) are its lack of hardware, and it is never called genuine hardware.
 */
export function headlineOf(verdict: Verdict, tee: unknown): Headline {
  if (tee === 'none' && verdict.failed.every((c) => NO_HARDWARE.has(c.name))) return 'development';
  if (verdict.outcome !== 'not-verified') return verdict.outcome;
  return verdict.failed.length === 0 && verdict.notPinned.length > 0 ? 'unpinned' : 'failed';
}

export interface HeadlineWords {
  text: string;
  tone: 'pass' | 'fail' | 'note';
  detail: string;
}

/** The plain words of each headline. */
export const HEADLINE_WORDS: Readonly<Record<Headline, HeadlineWords>> = {
  verified: {
    text: 'Verified: genuine confidential hardware, running the code your reference values name.',
    tone: 'pass',
    detail: 'Every check below passed. The chat below says whether it is encrypted to a key only that enclave holds.',
  },
  'verified-with-waivers': {
    text: 'Verified with waivers: genuine confidential hardware, running the code your reference values name.',
    tone: 'pass',
    detail: 'Every check below passed except the waived ones, each listed with what it gives up.',
  },
  unpinned: {
    text: 'Genuine confidential hardware, but its code was not compared with reference values.',
    tone: 'note',
    detail: "The hardware evidence and its bindings check out. Load your auditor's reference values to know which code runs.",
  },
  development: {
    text: 'Development service: no confidential hardware. Do not send anything private.',
    tone: 'fail',
    detail: 'This service runs without a hardware TEE (tee "none"): its keys are bound to nothing, and the operator could read prompts.',
  },
  failed: {
    text: 'Not verified: at least one check failed.',
    tone: 'fail',
    detail: 'Read the failed checks below. Do not send anything private to this service.',
  },
};
