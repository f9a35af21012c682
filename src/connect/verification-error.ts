import { AttestationError } from '../client/index.ts';
import { isNotPinned, isWaived, type Check } from '../verify/check.ts';
import { isVerifyError } from '../verify/errors.ts';
import { HttpError } from '../protocol/errors.ts';

/** The first check that kept the verdict from passing: what the app's error names in `param`. */
function failedCheck(checks: readonly Check[]): Check | undefined {
  return checks.find((c) => (!c.ok && !isWaived(c)) || isNotPinned(c));
}

/**
 * What the attested client refused, as the OpenAI-shaped error the app gets instead of the answer (docs/connect.md):
 * a 502 whose `code` says what failed and whose `param` names the check. Anything else is a service that could not be reached.
 */
export function connectErrorOf(err: unknown): HttpError {
  if (err instanceof AttestationError) {
    const check = failedCheck(err.checks);
    const code = err.code === 'ERR_VERIFY_RECEIPT' ? 'receipt_verification_failed' : 'attestation_failed';
    return new HttpError(code, `sigil connect did not pass this answer on: ${err.message}`, { param: check?.name ?? null });
  }
  if (isVerifyError(err) && err.code === 'ERR_VERIFY_UNSEALED_RESPONSE')
    return new HttpError('response_not_sealed', `sigil connect did not pass this answer on: ${err.message}`, { param: 'ehbp.response_nonce' });
  if (isVerifyError(err) && err.code === 'ERR_VERIFY_NONCE') return new HttpError('invalid_nonce', err.message);
  if (isVerifyError(err) && err.code === 'ERR_VERIFY_ATTESTATION') return new HttpError('attestation_failed', `sigil connect sent nothing: ${err.message}`);
  return new HttpError('upstream_unreachable', `sigil connect could not complete the exchange with the service: ${describe(err)}`);
}

/** A cause without the app's data: undici's "fetch failed" says little, its cause says what. */
function describe(err: unknown): string {
  const e = err as Error & { cause?: Error & { code?: string } };
  const cause = e.cause === undefined ? '' : ` (${e.cause.code ?? e.cause.message})`;
  return `${e.message}${cause}`;
}

/** A stream that broke before its receipt: nothing vouches for what arrived, so it ends with this error instead of its last event. */
export function cutStreamError(err: unknown): HttpError {
  if (err instanceof AttestationError || isVerifyError(err)) return connectErrorOf(err);
  return new HttpError(
    'receipt_verification_failed',
    `sigil connect did not pass the end of this stream on: it broke before its receipt arrived (${describe(err)}), so nothing vouches for what it carried`,
    { param: 'receipt.present' },
  );
}
