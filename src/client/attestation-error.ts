import { isNotPinned, isWaived, type Check } from '../verify/check.ts';
import { VerifyError } from '../verify/errors.ts';

/** The error a refused attestation or receipt raises: `checks` says which check failed and why. */
export class AttestationError extends VerifyError {
  constructor(
    message: string,
    readonly checks: readonly Check[],
    code: 'ERR_VERIFY_ATTESTATION' | 'ERR_VERIFY_RECEIPT' = 'ERR_VERIFY_ATTESTATION',
  ) {
    super(code, message);
  }
}

/** The checks that kept a verdict from passing, in one line: each name, NOT PINNED where nothing was compared, and why. */
export function failedSummary(checks: readonly Check[]): string {
  return checks
    .filter((c) => (!c.ok && !isWaived(c)) || isNotPinned(c))
    .map((c) => `${c.name}: ${isNotPinned(c) ? 'NOT PINNED: ' : ''}${c.detail}`)
    .join('; ');
}
