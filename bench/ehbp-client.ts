/** The bench's EHBP client: the npm `ehbp` library seals a chat request for Sigil's published HPKE key and opens its sealed answer. */
import { Identity, type RequestContext } from 'ehbp';
import { request, type Dispatcher } from 'undici';

export interface SealedRequest {
  headers: Record<string, string>;
  body: Uint8Array;
  /** What opens the sealed answer; absent for a request sent in the clear. */
  context?: RequestContext;
}

/** The server's identity, from the key configuration Sigil publishes at /.well-known/hpke-keys. */
export async function fetchServerIdentity(base: string, dispatcher: Dispatcher): Promise<Identity> {
  const response = await request(`${base}/.well-known/hpke-keys`, { dispatcher });
  if (response.statusCode !== 200) throw new Error(`${base}/.well-known/hpke-keys answered ${response.statusCode}`);
  return Identity.unmarshalPublicConfig(new Uint8Array(await response.body.arrayBuffer()));
}

export async function sealRequest(identity: Identity, url: string, headers: Record<string, string>, body: string): Promise<SealedRequest> {
  const { request: sealed, context } = await identity.encryptRequestWithContext(new Request(url, { method: 'POST', headers, body }));
  return { headers: Object.fromEntries(sealed.headers.entries()), body: new Uint8Array(await sealed.arrayBuffer()), context: context ?? undefined };
}

/** Requests sealed ahead of a timed phase (each is single use: a fresh HPKE context per request), so the client's sealing does not pace the server. */
export function sealBatch(identity: Identity, url: string, headers: Record<string, string>, body: string, count: number): Promise<SealedRequest[]> {
  return Promise.all(Array.from({ length: count }, () => sealRequest(identity, url, headers, body)));
}

/**
 * Sends prepared requests back to back from `concurrency` loops until `seconds` have passed or none is
 * left; `read` takes each answer whole. A request that fails throws, unless `failed` is given: then it
 * is passed there and its loop goes on. Returns how many were sent and the time it took.
 */
export async function sendBackToBack(
  url: string,
  prepared: readonly SealedRequest[],
  concurrency: number,
  seconds: number,
  dispatcher: Dispatcher,
  read: (response: Dispatcher.ResponseData, sent: SealedRequest) => Promise<void>,
  failed?: (err: Error) => void,
): Promise<{ sent: number; seconds: number }> {
  let next = 0;
  const t0 = performance.now();
  const deadline = t0 + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline && next < prepared.length) {
        const one = prepared[next++]!;
        const sending = request(url, { method: 'POST', headers: one.headers, body: one.body, dispatcher });
        if (failed === undefined) await read(await sending, one);
        else await sending.then((response) => read(response, one), failed);
      }
    }),
  );
  return { sent: next, seconds: (performance.now() - t0) / 1000 };
}

/** The plaintext of a sealed answer, one piece per frame (Sigil seals each chunk it relays as one frame). */
export async function* openSealedFrames(identity: Identity, response: Dispatcher.ResponseData, context: RequestContext): AsyncGenerator<Uint8Array> {
  const raw = new Response(response.body as unknown as ReadableStream, { headers: response.headers as Record<string, string> });
  const reader = (await identity.decryptResponseWithContext(raw, context)).body!.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    yield value as Uint8Array;
  }
}
