import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from '../logger/logger.ts';

/** `up`: Redis answers and fleet state is shared. `degraded`: Redis is unreachable; every part runs on local state. */
export type FleetHealth = 'up' | 'degraded';

/** What the HTTP layer may ask of a fleet (GET /readyz). */
export interface FleetStatus {
  readonly replicaId: string;
  health(): FleetHealth;
}

export interface FleetConnectionOptions {
  url: string;
  /** A command that has no answer after this long fails, and the caller falls back to local state. */
  commandTimeoutMs: number;
  connectTimeoutMs: number;
  /** Shown in Redis' CLIENT LIST, to tell replicas apart. */
  name: string;
  logger: Logger;
}

const RECONNECT_MAX_DELAY_MS = 1000;
/** After a command times out, Redis is left alone this long (then probed), so a hung server costs one timeout, not one per request. */
const SUSPEND_MS = 1000;

/**
 * ioredis settings for a connection that must never stall a request: no offline queue (a command
 * sent while disconnected fails at once), no retries per request, a short command timeout, and
 * reconnection forever in the background.
 */
export function redisOptions(options: FleetConnectionOptions): RedisOptions {
  return {
    connectionName: options.name,
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    enableReadyCheck: true,
    autoResubscribe: false,
    connectTimeout: options.connectTimeoutMs,
    commandTimeout: options.commandTimeoutMs,
    retryStrategy: (attempt) => Math.min(50 * attempt, RECONNECT_MAX_DELAY_MS),
    // Commands issued by concurrent requests in the same tick go out in one write.
    enableAutoPipelining: true,
  };
}

/**
 * One Redis connection and its health. Health changes are logged once per transition (not per
 * failed command) and announced to listeners, which use `up` to resynchronise.
 */
export class FleetConnection {
  readonly client: Redis;
  readonly #logger: Logger;
  readonly #listeners = new Set<(health: FleetHealth) => void>();
  #health: FleetHealth = 'degraded';
  #closed = false;
  #suspended: NodeJS.Timeout | undefined;

  constructor(options: FleetConnectionOptions, client?: Redis) {
    this.#logger = options.logger;
    this.client = client ?? new Redis(options.url, redisOptions(options));
    this.client.on('ready', () => {
      if (this.#suspended === undefined) this.#set('up');
    });
    this.client.on('close', () => this.#set('degraded'));
    // Failures show up as the `close` transition; an `error` listener keeps them from being thrown.
    this.client.on('error', () => undefined);
  }

  get health(): FleetHealth {
    return this.#health;
  }

  /** True when a command sent now would reach Redis (and Redis has not just failed to answer one). */
  get up(): boolean {
    return this.client.status === 'ready' && this.#suspended === undefined;
  }

  /**
   * Callers report a failed command here. A timeout or a connection error means Redis is connected
   * but not answering (overloaded, paused, a network partition): the fleet runs on local state until
   * a PING answers again.
   */
  noteFailure(err: unknown): void {
    if (this.#closed || this.#suspended !== undefined || (err instanceof Error && err.name === 'ReplyError')) return;
    this.#set('degraded');
    const probe = () => {
      this.client.ping().then(
        () => {
          this.#suspended = undefined;
          if (this.client.status === 'ready') this.#set('up');
        },
        () => {
          if (!this.#closed) this.#suspended = setTimeout(probe, SUSPEND_MS).unref();
        },
      );
    };
    this.#suspended = setTimeout(probe, SUSPEND_MS).unref();
  }

  onHealth(listener: (health: FleetHealth) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Starts connecting; resolves when Redis is ready or after `timeoutMs`, whichever comes first (never rejects). */
  async connect(timeoutMs: number): Promise<FleetHealth> {
    if (this.client.status === 'wait') this.client.connect().catch(() => undefined);
    if (this.up) return 'up';
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, timeoutMs);
      this.client.once('ready', done);
      function done() {
        clearTimeout(timer);
        resolve();
      }
    });
    return this.#health;
  }

  /** A second connection to the same server (a subscriber cannot send ordinary commands). */
  duplicate(name: string): FleetConnection {
    const options = { ...this.client.options, connectionName: name, lazyConnect: true, enableAutoPipelining: false };
    return new FleetConnection({ url: '', commandTimeoutMs: 0, connectTimeoutMs: 0, name, logger: this.#logger }, new Redis(options));
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#suspended);
    this.#listeners.clear();
    if (this.up) await this.client.quit().catch(() => undefined);
    this.client.disconnect();
  }

  #set(health: FleetHealth): void {
    if (health === this.#health || this.#closed) return;
    this.#health = health;
    const name = this.client.options.connectionName;
    if (health === 'up') this.#logger.info({ connection: name }, 'fleet: Redis reachable; shared state in use');
    else this.#logger.warn({ connection: name }, 'fleet: Redis unreachable; limits, receipts and keys run on local state until it is back');
    for (const listener of this.#listeners) listener(health);
  }
}
