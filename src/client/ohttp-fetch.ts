/**
 * A `fetch` that sends every request through an Oblivious HTTP relay (docs/ohttp.md): the request becomes a binary
 * HTTP message sealed to the gateway's key, POSTed to the relay, which forwards it to the gateway without knowing
 * what it says; the answer comes back sealed and is opened here as it streams. The service never sees this client's
 * address, the relay never sees what it asked. Which key to seal to is the caller's to check: see
 * `fetchGatewayKeys` and the attested client, which binds it to the enclave.
 */
import { BinaryResponseReader, encodeRequest, type FieldLine } from '../protocol/bhttp.ts';
import { CHUNKED_REQUEST_MEDIA_TYPE, CHUNKED_RESPONSE_MEDIA_TYPE, GATEWAY_PATH, KEYS_MEDIA_TYPE, parseKeyConfigs, type KeyConfig } from '../protocol/ohttp.ts';
import { encapsulateRequest } from './ohttp-encapsulate.ts';
import { SigilError } from '../protocol/sigil-error.ts';

type Fetch = typeof globalThis.fetch;

/** A relay or gateway answer that is not an encapsulated response: nothing in it can be trusted, and it says so. */
export class ObliviousRelayError extends SigilError<'ERR_OHTTP_RELAY'> {
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_OHTTP_RELAY', message, options);
  }
}

/** The relay reached, or an error that names it and why not (the cause's code: ECONNREFUSED, ENOTFOUND, ...); an abort stays an abort. */
async function reachRelay(fetch: Fetch, relayUrl: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(relayUrl, init);
  } catch (err) {
    if (init.signal?.aborted === true) throw err;
    const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
    const why = typeof cause?.code === 'string' ? cause.code : typeof cause?.message === 'string' ? cause.message : (err as Error).message;
    throw new ObliviousRelayError(`the Oblivious HTTP relay ${relayUrl} could not be reached: ${why}`, { cause: err });
  }
}

/** Fields the client never puts inside the sealed request: they describe its connection to the relay. */
const CONNECTION_FIELDS = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'host', 'content-length']);

/**
 * The gateway's key configurations, fetched through the relay as RFC 9540 suggests (the service then does not see
 * this client's address for this request either). Bounded: a key list is a few dozen bytes.
 */
export async function fetchGatewayKeys(
  relayUrl: string,
  { fetch = globalThis.fetch, signal }: { fetch?: Fetch; signal?: AbortSignal } = {},
): Promise<KeyConfig[]> {
  const answer = await reachRelay(fetch, relayUrl, { headers: { accept: KEYS_MEDIA_TYPE }, ...(signal === undefined ? {} : { signal }) });
  if (!answer.ok || answer.headers.get('content-type')?.split(';')[0]?.trim() !== KEYS_MEDIA_TYPE) {
    await answer.body?.cancel();
    throw new ObliviousRelayError(`the relay did not serve the gateway's key configuration (HTTP ${answer.status})`);
  }
  const bytes = new Uint8Array(await answer.arrayBuffer());
  if (bytes.length > 4096) throw new ObliviousRelayError('the gateway key configuration is larger than 4 KiB');
  return parseKeyConfigs(bytes);
}

export interface ObliviousFetchOptions {
  /** The relay's URL: it forwards POSTs to the gateway (`GATEWAY_PATH` of the service) and GETs for its keys. */
  relayUrl: string;
  /** The gateway's key configurations, checked by the caller (the attested client checks them against the enclave's binding). */
  keys: KeyConfig[];
  /** The fetch that reaches the relay; default the global one. */
  fetch?: Fetch;
}

/** A `fetch` whose every request goes through the relay, sealed; a stream's events arrive as the gateway seals them. */
export function createObliviousFetch({ relayUrl, keys, fetch = globalThis.fetch }: ObliviousFetchOptions): Fetch {
  return (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    const url = new URL(request.url);
    if (url.pathname === GATEWAY_PATH) throw new TypeError('an oblivious fetch does not address the gateway itself');
    const headers: FieldLine[] = [];
    request.headers.forEach((value, name) => {
      if (!CONNECTION_FIELDS.has(name)) headers.push([name, value]);
    });
    const content = new Uint8Array(await request.arrayBuffer());
    const binary = encodeRequest({
      method: request.method,
      scheme: url.protocol.slice(0, -1),
      authority: url.host,
      path: url.pathname + url.search,
      headers,
      content,
      trailers: [],
    });
    const sealed = await encapsulateRequest(keys, binary, 'chunked');
    const relayed = await reachRelay(fetch, relayUrl, {
      method: 'POST',
      headers: { 'content-type': CHUNKED_REQUEST_MEDIA_TYPE },
      body: Buffer.from(sealed.body),
      ...(request.signal === undefined ? {} : { signal: request.signal }),
    });
    if (relayed.status !== 200 || relayed.headers.get('content-type')?.split(';')[0]?.trim() !== CHUNKED_RESPONSE_MEDIA_TYPE || relayed.body === null) {
      const detail = relayed.headers.get('content-type')?.includes('json') ? `: ${(await relayed.text()).slice(0, 300)}` : '';
      if (detail === '') await relayed.body?.cancel();
      throw new ObliviousRelayError(`the relay answered HTTP ${relayed.status} without an encapsulated response${detail}`);
    }
    return openStreamedAnswer(relayed.body, await sealed.chunkedResponse());
  }) as Fetch;
}

/** The sealed chunks opened, the binary response read as they come: a Response as soon as the head is in, its body a stream. */
async function openStreamedAnswer(
  body: ReadableStream<Uint8Array>,
  opener: Awaited<ReturnType<Awaited<ReturnType<typeof encapsulateRequest>>['chunkedResponse']>>,
): Promise<Response> {
  const reader = body.getReader();
  const binary = new BinaryResponseReader();
  let head: { status: number; headers: FieldLine[] } | undefined;
  const early: Uint8Array[] = [];
  const take = (pieces: Uint8Array[]) => {
    for (const piece of pieces) {
      for (const event of binary.push(piece)) {
        if ('head' in event) head = event.head;
        else early.push(event.content);
      }
    }
  };
  // A gateway may send the whole answer in its final chunk: the body has then ended before the head is read.
  let ended = false;
  while (head === undefined) {
    const { done, value } = await reader.read();
    if (done) {
      take([opener.end()]);
      binary.end();
      ended = true;
      break;
    }
    take(await opener.push(value));
  }
  if (head === undefined) throw new ObliviousRelayError('the encapsulated response ended before its head');
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const piece of early.splice(0)) controller.enqueue(piece);
      if (ended) controller.close();
    },
    async pull(controller) {
      if (ended) return;
      try {
        const { done, value } = await reader.read();
        const pieces = done ? [opener.end()] : await opener.push(value);
        for (const piece of pieces) {
          for (const event of binary.push(piece)) if ('content' in event) controller.enqueue(new Uint8Array(event.content));
        }
        if (done) {
          binary.end();
          ended = true;
          controller.close();
        }
      } catch (error) {
        controller.error(error);
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
  const status = head.status;
  const nullBody = status === 204 || status === 304;
  return new Response(nullBody ? null : stream, { status, headers: head.headers.map(([name, value]) => [name, value] as [string, string]) });
}
