import { splitSealedJson } from '../../protocol/sealed-receipt.ts';
import { readResponseBounded, tooLargeError } from '../../verify/bounded-read.ts';
import { AttestationError, failedSummary } from '../attestation-error.ts';
import { loggedReceipts } from '../log-inclusion.ts';
import { verifyExchangeReceipt, type Exchange, type ReceiptResult } from '../receipts.ts';
import { unverifiedAnswer } from './unverified.ts';
import type { Answered, ClientContext } from './stage.ts';

function isEventStream(response: Response): boolean {
  return (response.headers.get('content-type') ?? '').startsWith('text/event-stream');
}

interface LogPlace {
  indexHeader: string | null;
  sealedIndex?: number | undefined;
  sealed: boolean;
}

/**
 * A response's receipts checked against the verdict, over the exact bytes each way. A signing key the attested JWKS does
 * not hold may be a rotation: the service is attested again once and the receipt looked at again. A verified receipt is
 * then looked for in the log (not holding the answer back), and the verdict recorded.
 */
export async function checkReceipt(client: ClientContext, exchange: Exchange, place: LogPlace): Promise<ReceiptResult> {
  let attested = client.session.attested;
  let result = await verifyExchangeReceipt(exchange, attested);
  if (!result.ok && result.checks.some((c) => c.name === 'receipt.signature' && !c.ok)) {
    attested = await client.session.reattest();
    result = await verifyExchangeReceipt(exchange, attested);
  }
  const logged = loggedReceipts(exchange, place.indexHeader, place.sealedIndex, place.sealed);
  if (logged[0]?.index !== undefined) result.logIndex = logged[0].index;
  if (result.ok && client.inclusion.applies && logged.length > 0) result.inclusion = client.inclusion.ofResponse(logged, result);
  client.record(result);
  client.onExchange?.(exchange, result, attested);
  return result;
}

/** `requireInclusion`: the answer waits for its receipt's inclusion proof; a receipt not proven in the log refuses it. */
async function provenInLog(result: ReceiptResult): Promise<void> {
  if (result.inclusion === undefined)
    throw new AttestationError(
      "the answer's receipt was not looked for in a transparency log (the attestation binds none, or the receipt failed), and inclusion is required",
      [{ name: 'log.inclusion', ok: false, detail: 'not checked: no attested log holds this receipt' }],
      'ERR_VERIFY_RECEIPT',
    );
  const verdict = await result.inclusion;
  if (!verdict.ok)
    throw new AttestationError(`the answer's receipt is not proven in the service's log: ${verdict.detail}`, verdict.checks, 'ERR_VERIFY_RECEIPT');
}

const receiptError = (what: string, result: ReceiptResult) =>
  new AttestationError(`${what} receipt did not verify: ${result.problem ?? failedSummary(result.checks)}`, result.checks, 'ERR_VERIFY_RECEIPT');

/**
 * Step three: only what a receipt covers is handed over as the answer to a POST. A JSON answer is held until its receipt
 * verified; a stream goes to the caller chunk by chunk and errors at its end if its receipt fails. An answer that asked for
 * no receipt, or a refusal, is handed over as it is over TLS ending in the enclave; otherwise nothing authenticated it, and
 * it is an error that says so (`unverifiedAnswer`), never a success.
 */
export async function verifyReceipt(client: ClientContext, answered: Answered): Promise<Response> {
  const { response, encrypts, attested } = answered;
  if (!answered.wantsReceipt && attested.tlsSpkiSha256 === null) return unverifiedAnswer(response);
  if (!answered.wantsReceipt || response.status < 200 || response.status > 299) return response;
  const names = client.headerNames;
  const exchangeOf = (responseBytes: Uint8Array): Exchange => ({
    path: answered.url.pathname,
    nonce: answered.nonce,
    requestBytes: answered.body ?? new Uint8Array(),
    responseBytes,
    stream: isEventStream(response),
    receiptHeader: response.headers.get(names.receipt),
  });
  if (response.body === null) {
    const result = await checkReceipt(client, exchangeOf(new Uint8Array()), { indexHeader: null, sealed: false });
    if (!result.ok) throw receiptError("the response's", result);
    return response;
  }
  const init = { status: response.status, statusText: response.statusText, headers: response.headers };
  if (!isEventStream(response)) {
    const read = await readResponseBounded(response, { what: "the service's answer", maxBytes: client.maxAnswerBytes });
    let bytes = new Uint8Array(read.buffer as ArrayBuffer, read.byteOffset, read.byteLength);
    // Sealed, the receipt is the body's last frame: the caller gets the engine's bytes alone.
    const trailer = encrypts ? splitSealedJson(bytes) : undefined;
    if (trailer !== undefined) bytes = new Uint8Array(trailer.body);
    const result = await checkReceipt(
      client,
      { ...exchangeOf(bytes), receiptHeader: encrypts ? (trailer?.receipt ?? null) : response.headers.get(names.receipt) },
      { indexHeader: response.headers.get(names.logIndex), sealedIndex: trailer?.logIndex, sealed: encrypts },
    );
    if (!result.ok && client.onInvalid === 'throw') throw receiptError("the response's", result);
    if (client.requireInclusion) await provenInLog(result);
    return new Response(bytes, init);
  }
  // Each chunk goes to the caller as it arrives; the receipt at the end is checked over all of them.
  const chunks: Uint8Array[] = [];
  let held = 0;
  const verified = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      held += chunk.byteLength;
      // The receipt hashes the whole stream, so its bytes are held until the end: never more than the cap.
      if (held > client.maxAnswerBytes) throw tooLargeError({ what: "the service's event stream", maxBytes: client.maxAnswerBytes });
      chunks.push(chunk);
      controller.enqueue(chunk);
    },
    async flush(controller) {
      const result = await checkReceipt(client, exchangeOf(Buffer.concat(chunks)), { indexHeader: response.headers.get(names.logIndex), sealed: encrypts });
      if (!result.ok && client.onInvalid === 'throw') controller.error(receiptError("the stream's", result));
    },
  });
  return new Response(response.body.pipeThrough(verified), init);
}
