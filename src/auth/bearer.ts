import { hash, hkdfSync, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { httpError } from '../protocol/errors.ts';
import type { StoredKey } from './keys-file.ts';

/** Who made a request: the key's id, never the key. */
export interface Caller {
  keyHash: string;
  keyId: string;
  /**
   * 32 bytes derived from the presented key (HKDF-SHA256), kept in memory while the key is in the key set:
   * what seals the caller's receipts at rest and salts its prefix cache. The stored key hash does not give it.
   */
  secret: Buffer;
}

const CALLER_SECRET_SALT = 'sigil caller secret';

/**
 * An authenticated caller. Its secret is derived on first use: most requests never need it (only a
 * salted engine or a receipt sealed at rest does), and HKDF was the largest item of the JSON profile.
 * Once derived, it is kept by its key hash in `secrets` (the key ring's), so the key's later requests
 * read it (every receipt does, handed to the primary by a worker) without an HKDF each.
 */
class AuthenticatedCaller implements Caller {
  readonly keyHash: string;
  readonly keyId: string;
  #key: string;
  #secrets: Map<string, Buffer>;

  constructor(keyHash: string, key: string, secrets: Map<string, Buffer>) {
    this.keyHash = keyHash;
    this.keyId = keyHash.slice(0, 12);
    this.#key = key;
    this.#secrets = secrets;
  }

  get secret(): Buffer {
    let secret = this.#secrets.get(this.keyHash);
    if (secret === undefined) {
      secret = Buffer.from(hkdfSync('sha256', this.#key, CALLER_SECRET_SALT, '', 32));
      this.#secrets.set(this.keyHash, secret);
    }
    return secret;
  }
}

/**
 * The set of accepted keys, looked up by the SHA-256 of the presented key. The lookup is on a
 * digest the caller cannot steer, and the final comparison is constant-time.
 */
export class KeyRing {
  #byHash = new Map<string, Buffer>();
  /** The secrets of this set's keys derived so far (a key's secret is a function of the key its hash names): at most one per key. */
  #secrets = new Map<string, Buffer>();

  constructor(keys: readonly StoredKey[]) {
    this.replace(keys);
  }

  /** Swaps the whole set at once, so a reload never leaves a half-read file in use. */
  replace(keys: readonly StoredKey[]): void {
    this.#byHash = new Map(keys.map((k) => [k.hash, Buffer.from(k.hash, 'hex')]));
    this.#secrets = new Map();
  }

  get size(): number {
    return this.#byHash.size;
  }

  /** The caller named by `Authorization: Bearer <key>`, or by `x-api-key: <key>` as Anthropic's SDKs send it (docs/api.md#anthropic-messages). */
  authenticate(headers: IncomingHttpHeaders): Caller {
    const key = keyOf(headers);
    // One-shot: a Hash object per request (createHash) costs twice the digest itself.
    const digest = hash('sha256', key, 'buffer');
    const hex = digest.toString('hex');
    const stored = this.#byHash.get(hex);
    if (stored === undefined || !timingSafeEqual(stored, digest)) {
      throw httpError('invalid_api_key', 'Incorrect API key provided.');
    }
    return new AuthenticatedCaller(hex, key, this.#secrets);
  }
}

/**
 * The key a request carries: the bearer token, else `x-api-key` (Anthropic's SDKs send only that). With a bearer token
 * present `x-api-key` is not read: an OpenAI client's own header of that name (kept from the engine like any other)
 * must not change who the caller is.
 */
function keyOf(headers: IncomingHttpHeaders): string {
  const header = headers.authorization;
  if (header !== undefined && header !== '') {
    const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
    if (!match) throw httpError('invalid_api_key', "The Authorization header must be 'Bearer <key>'.");
    return match[1]!;
  }
  const apiKey = headers['x-api-key'];
  if (apiKey === undefined || apiKey === '') {
    throw httpError('missing_api_key', "You didn't provide an API key. Send it as 'Authorization: Bearer <key>' or 'x-api-key: <key>'.");
  }
  if (typeof apiKey !== 'string' || !/^\S+$/.test(apiKey.trim())) throw httpError('invalid_api_key', 'The x-api-key header must be one key.');
  return apiKey.trim();
}
