/**
 * An undici Dispatcher that sends every request through an Oblivious HTTP relay (docs/ohttp.md, "Clients"): what
 * `request()` or `fetch()` hands it becomes a binary HTTP request sealed to the gateway's key, and the sealed answer
 * is opened and handed back as if it came over a connection. Given to the steps that take a dispatcher (the
 * attestation's fetches, the app's requests, the log's), it moves all of them behind the relay unchanged.
 */
import { Agent, Dispatcher, fetch as undiciFetch } from 'undici';
import type { KeyConfig } from '../protocol/ohttp.ts';
import { createObliviousFetch } from './ohttp-fetch.ts';

type Fetch = typeof globalThis.fetch;

export interface ObliviousDispatcherOptions {
  /** The relay's URL. */
  relayUrl: string;
  /** The gateway key configurations to seal to: the attested one, except while the attestation itself is fetched. */
  keys: KeyConfig[];
}

async function bodyBytes(body: Dispatcher.DispatchOptions['body']): Promise<Uint8Array | undefined> {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string') return Buffer.from(body);
  if (body instanceof Uint8Array) return body;
  if (typeof body === 'object' && (Symbol.asyncIterator in body || Symbol.iterator in body)) {
    const pieces: Buffer[] = [];
    for await (const piece of body as AsyncIterable<Uint8Array | string>) pieces.push(typeof piece === 'string' ? Buffer.from(piece) : Buffer.from(piece));
    return Buffer.concat(pieces);
  }
  throw new TypeError('an oblivious request body must be bytes, a string or an iterable of them');
}

/** undici hands headers as a flat [name, value, ...] list, a list of pairs, or a record. */
function headerPairs(headers: Dispatcher.DispatchOptions['headers']): Array<[string, string]> {
  if (headers === undefined || headers === null) return [];
  const pairs: Array<[string, string]> = [];
  if (Array.isArray(headers)) {
    if (typeof headers[0] === 'string') {
      for (let i = 0; i + 1 < headers.length; i += 2) pairs.push([String(headers[i]), String(headers[i + 1])]);
    } else for (const [name, value] of headers as unknown as Array<[string, string]>) pairs.push([name, value]);
    return pairs;
  }
  const entries = Symbol.iterator in headers ? [...(headers as Iterable<[string, string | string[] | undefined]>)] : Object.entries(headers);
  for (const [name, value] of entries) {
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) pairs.push([name, String(one)]);
  }
  return pairs;
}

export class ObliviousDispatcher extends Dispatcher {
  readonly #relayUrl: string;
  readonly #keys: KeyConfig[];
  readonly #toRelay = new Agent();
  readonly #fetch: Fetch;

  constructor({ relayUrl, keys }: ObliviousDispatcherOptions) {
    super();
    this.#relayUrl = relayUrl;
    this.#keys = keys;
    this.#fetch = ((input: string, init?: RequestInit) =>
      undiciFetch(input, { ...init, dispatcher: this.#toRelay } as Parameters<typeof undiciFetch>[1])) as unknown as Fetch;
  }

  /** The fetch that reaches the relay itself (for the key configuration). */
  get relayFetch(): Fetch {
    return this.#fetch;
  }

  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    void this.#send(options, handler);
    return true;
  }

  async #send(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): Promise<void> {
    const aborter = new AbortController();
    handler.onConnect?.((reason) => aborter.abort(reason ?? new Error('aborted')));
    try {
      const url = new URL(options.path, options.origin);
      const body = await bodyBytes(options.body);
      const oblivious = createObliviousFetch({ relayUrl: this.#relayUrl, keys: this.#keys, fetch: this.#fetch });
      const response = await oblivious(url, {
        method: options.method,
        headers: headerPairs(options.headers),
        ...(body === undefined ? {} : { body: body as BodyInit }),
        signal: aborter.signal,
      });
      const raw: Buffer[] = [];
      response.headers.forEach((value, name) => raw.push(Buffer.from(name, 'latin1'), Buffer.from(value, 'latin1')));
      let resume: () => void = () => undefined;
      handler.onHeaders?.(response.status, raw, () => resume(), response.statusText);
      if (response.body !== null) {
        for await (const piece of response.body) {
          // The handler's buffer is full: wait until it asks for more.
          if (handler.onData?.(Buffer.from(piece)) === false) await new Promise<void>((resolve) => (resume = resolve));
        }
      }
      handler.onComplete?.([]);
    } catch (err) {
      handler.onError?.(err instanceof Error ? err : new Error(String(err)));
    }
  }

  override close(): Promise<void>;
  override close(callback: () => void): void;
  override close(callback?: () => void): Promise<void> | void {
    const closed = this.#toRelay.close();
    if (callback === undefined) return closed;
    void closed.then(callback);
  }

  override destroy(): Promise<void>;
  override destroy(err: Error | null): Promise<void>;
  override destroy(callback: () => void): void;
  override destroy(err: Error | null, callback: () => void): void;
  override destroy(first?: Error | null | (() => void), second?: () => void): Promise<void> | void {
    const callback = typeof first === 'function' ? first : second;
    const destroyed = this.#toRelay.destroy(typeof first === 'function' ? null : (first ?? null));
    if (callback === undefined) return destroyed;
    void destroyed.then(callback);
  }
}
