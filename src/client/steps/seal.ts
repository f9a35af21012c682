import { exchangeReceiptNonce } from '../../protocol/sealed-receipt.ts';
import { VerifyError } from '../../verify/errors.ts';
import { AttestationError } from '../attestation-error.ts';
import { sendPinned } from './pin.ts';
import { unverifiedAnswer } from './unverified.ts';
import type { Answered, ClientContext, Prepared } from './stage.ts';

/** Step two, for a request without a body to seal: sent as it is over the verdict's connections. */
export async function sendClear(client: ClientContext, prepared: Prepared): Promise<Answered> {
  const { url, init, method, headers, body } = prepared;
  const response = await sendPinned(client.session, url, { ...init, method, headers }, body);
  return { ...prepared, response };
}

/**
 * Step two, sealed (EHBP): the body sealed to the attested HPKE key, the answer opened with the request's own context as
 * it streams. A 422 for a key the service no longer holds re-attests and sends once more; an answer to a sealed request
 * that is not sealed is refused, except a refusal made before the body was opened, which is an error, never a success:
 * it is handed over as it is (`finished`), with no receipt to check.
 */
export async function sendSealed(client: ClientContext, prepared: Prepared): Promise<Answered | { finished: Response }> {
  const { url, init, method, headers, body, session } = { ...prepared, session: client.session };
  const seal = async () => {
    const sealed = await (await session.identity()).encryptRequestWithContext(new Request(url, { method, headers, body: body as unknown as BodyInit }));
    const sealedBody = new Uint8Array(await sealed.request.arrayBuffer());
    const raw = await sendPinned(session, url, { ...init, method, headers: sealed.request.headers }, sealedBody);
    return { sealed, raw };
  };
  let attested = prepared.attested;
  let { sealed, raw } = await seal();
  if (raw.status === 422 && (raw.headers.get('content-type') ?? '').startsWith('application/problem+json')) {
    // Sealed to a key the service no longer holds (it restarted): nothing was processed; re-attest its new key, send once more.
    await raw.arrayBuffer();
    attested = await session.reattest();
    if (attested.hpkeKeyConfig === null) throw new AttestationError('the service no longer offers an attested HPKE key', attested.checks);
    ({ sealed, raw } = await seal());
  }
  const nonce = prepared.ownNonce ?? (await exchangeReceiptNonce(sealed.context!.senderContext));
  // Refusals made before the body was opened (a bad API key, a limit: docs/ehbp.md) come in the clear.
  if (raw.headers.get('ehbp-response-nonce') === null && raw.status >= 400)
    return { finished: attested.tlsSpkiSha256 === null ? await unverifiedAnswer(raw) : raw };
  if (raw.headers.get('ehbp-response-nonce') === null) {
    // Nothing sealed it, so anyone on the way could have written it: never hand it over as the service's answer.
    await raw.body?.cancel();
    throw new VerifyError(
      'ERR_VERIFY_UNSEALED_RESPONSE',
      `the answer to a sealed request (HTTP ${raw.status}) is not sealed to our request: it may not come from the enclave, so it is not returned`,
    );
  }
  const response = await (await session.identity()).decryptResponseWithContext(raw, sealed.context!);
  return { ...prepared, attested, nonce, response };
}
