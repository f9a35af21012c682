import { readResponseBounded } from '../../verify/bounded-read.ts';

/** The response header that says an answer was not authenticated: neither sealed, nor over TLS ending in the enclave, nor under a receipt. */
export const UNVERIFIED_HEADER = 'x-attested-fetch-unverified';

const WHY =
  'this answer was neither sealed nor sent over TLS ending in the enclave nor covered by a receipt: anyone between you and the enclave could have written it';
/** An error's own words are kept for the caller to read, up to this much: enough for any message, nothing a relay could flood. */
const MAX_ERROR_BYTES = 64 * 1024;

/**
 * What the caller gets for an answer nothing authenticated (docs/connect.md, "Only what was verified"): never a
 * success. An error (4xx, 5xx) stays the error it is, its message prefixed with "unverified" and the header saying
 * why, so an app that shows the message shows that too; a success becomes a 502 `unverified_answer` naming its
 * status, its content dropped, since nothing the attestation binds covers it.
 */
export async function unverifiedAnswer(response: Response): Promise<Response> {
  const headers = new Headers({ 'content-type': 'application/json', [UNVERIFIED_HEADER]: WHY });
  if (response.status < 400) {
    await response.body?.cancel();
    const message = `sigil: the service's answer (HTTP ${response.status}) was not handed over: ${WHY}`;
    return new Response(JSON.stringify({ error: { message, type: 'verification_error', param: null, code: 'unverified_answer' } }), { status: 502, headers });
  }
  let error: { message: string; type: string; param: unknown; code: unknown } = {
    message: '',
    type: 'api_error',
    param: null,
    code: null,
  };
  try {
    const text = (await readResponseBounded(response, { what: 'an unverified error', maxBytes: MAX_ERROR_BYTES })).toString('utf8');
    const parsed = JSON.parse(text) as { error?: Partial<typeof error> };
    if (typeof parsed.error?.message === 'string') error = { ...error, ...parsed.error, message: parsed.error.message };
    else error.message = text.slice(0, 500);
  } catch {
    error.message = '(its body could not be read as an error)';
  }
  error.message = `[unverified: not sealed, not over TLS ending in the enclave] ${error.message}`;
  return new Response(JSON.stringify({ error }), { status: response.status, statusText: response.statusText, headers });
}
