import type { IncomingHttpHeaders } from 'node:http';
import { KeyRing, type Caller } from '../auth/bearer.ts';
import type { StoredKey } from '../auth/keys-file.ts';
import { httpError } from '../protocol/errors.ts';
import type { Logger } from '../logger/logger.ts';
import type { FleetConnection } from './connection.ts';
import type { FleetKeys } from './redis-keys.ts';
import { InvariantError } from '../protocol/invariant-error.ts';

const KEY_HASH = /^[0-9a-f]{64}$/;

/**
 * The keys file decides which keys exist; the fleet's revocation list can only take keys away. A
 * revoked key is refused even while it is still in this replica's copy of the file (or comes back
 * with a reload of an old copy).
 */
export class FleetKeyRing extends KeyRing {
  readonly #revoked: ReadonlySet<string>;

  constructor(keys: readonly StoredKey[], revoked: ReadonlySet<string>) {
    super(keys);
    this.#revoked = revoked;
  }

  override authenticate(headers: IncomingHttpHeaders): Caller {
    const caller = super.authenticate(headers);
    if (this.#revoked.has(caller.keyHash)) throw httpError('invalid_api_key', 'Incorrect API key provided.');
    return caller;
  }
}

/** Records a revocation in Redis and announces it; rejects when Redis does not take it. */
export async function recordRevocation(connection: FleetConnection, keys: FleetKeys, keyHash: string): Promise<void> {
  if (!KEY_HASH.test(keyHash)) throw new InvariantError('a key hash is 64 lowercase hex digits');
  await connection.client.zadd(keys.revokedApiKeys, 'NX', Date.now(), keyHash);
  await connection.client.publish(keys.revocationChannel, keyHash);
}

/**
 * Keeps this replica's set of revoked API-key hashes in step with the fleet's: pub/sub for speed, a
 * poll every `pollMs` as the backstop for missed messages and reconnections. The set only grows: a
 * revocation this replica knows and Redis has lost (a restart without persistence) is written back.
 */
export class RevocationWatcher {
  readonly revoked = new Set<string>();
  readonly #listeners = new Set<(keyHash: string) => void>();
  readonly #connection: FleetConnection;
  readonly #subscriber: FleetConnection;
  readonly #keys: FleetKeys;
  readonly #pollMs: number;
  readonly #logger: Logger;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: { connection: FleetConnection; subscriber: FleetConnection; keys: FleetKeys; pollMs: number; logger: Logger }) {
    this.#connection = options.connection;
    this.#subscriber = options.subscriber;
    this.#keys = options.keys;
    this.#pollMs = options.pollMs;
    this.#logger = options.logger;
    this.#subscriber.client.on('message', (channel: string, message: string) => {
      if (channel === this.#keys.revocationChannel) this.#add(message);
    });
  }

  async start(): Promise<void> {
    await this.poll();
    this.#timer = setInterval(() => void this.poll(), this.#pollMs);
    this.#timer.unref();
  }

  /** Reads the fleet's list; never rejects (the last known set stays in force). */
  async poll(): Promise<void> {
    if (!this.#connection.up) return;
    try {
      const listed = await this.#connection.client.zrange(this.#keys.revokedApiKeys, 0, -1);
      for (const hash of listed) this.#add(hash);
      if (listed.length < this.revoked.size) {
        const known = new Set(listed);
        const lost = [...this.revoked].filter((hash) => !known.has(hash));
        await this.#connection.client.zadd(this.#keys.revokedApiKeys, 'NX', ...lost.flatMap((hash) => [Date.now(), hash]));
      }
    } catch (err) {
      this.#connection.noteFailure(err);
      this.#logger.debug({ err: (err as Error).message }, 'fleet: revocation list not read; the last known one stays');
    }
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#listeners.clear();
  }

  /** Called with each key hash newly revoked (a workers' primary passes them on). */
  onRevoked(listener: (keyHash: string) => void): void {
    this.#listeners.add(listener);
  }

  #add(hash: string): void {
    if (!KEY_HASH.test(hash) || this.revoked.has(hash)) return;
    this.revoked.add(hash);
    this.#logger.info({ key_id: hash.slice(0, 12) }, 'fleet: API key revoked');
    for (const listener of this.#listeners) listener(hash);
  }
}
