import type { Check } from '../verify/check.ts';
import type { OptionSpecs } from './command-line.ts';
import type { ReferenceValues } from '../verify/reference/reference-values.ts';

/** What an extension's verification gets besides its own option values. */
export interface EvidenceContext {
  at: Date;
  reference: ReferenceValues | undefined;
  /** Reads a file; a file that cannot be read ends the command with exit status 3. */
  read: (path: string, what: string) => Promise<Buffer>;
  /** The collateral bundle directory (--collateral DIR), when given. */
  collateral?: string;
}

/**
 * More evidence `sigil verify-evidence` can check, with its own options (e.g. NVIDIA GPU reports: --gpu-report,
 * --gpu-certs, --nonce). Its checks join the report; its measured values go under `measured[name]`.
 */
export interface EvidenceExtension {
  name: string;
  /** Its options, declared as every command's are: --help lists them. */
  options: OptionSpecs;
  /** What --help says about this evidence after the options, when the options alone do not say it. */
  notes?: string;
  /** Whether the given option values ask for this evidence. */
  wants(values: Record<string, string | boolean | undefined>): boolean;
  /** A usage problem with the given option values (exit status 2), or undefined when they are complete. */
  usageProblem?(values: Record<string, string | boolean | undefined>): string | undefined;
  verify(values: Record<string, string | boolean | undefined>, ctx: EvidenceContext): Promise<{ checks: Check[]; measured?: unknown }>;
}
