import { randomUUID } from 'node:crypto';
import { MemoryLimitCounters, windowOf, type LimitCounters, type WindowCount } from '../limits/counters.ts';
import type { Logger } from '../logger/logger.ts';
import type { FleetConnection } from './connection.ts';
import type { FleetKeys } from './redis-keys.ts';
import { REDIS_NOW_MS, RedisScript } from './script.ts';

/**
 * INCRBY, and the expiry set once per window key (so a window never outlives its end by much). A value that is not a
 * count Sigil could have written (digits only, at most 15 of them) is left as it is and answered -1: not a count.
 */
const ADD = new RedisScript(`local current = redis.call('GET', KEYS[1])
if current and (not string.match(current, '^%d+$') or string.len(current) > 15) then return -1 end
local total = redis.call('INCRBY', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return total`);

/** What this replica counted itself can be: 15 digits, below 2^53. */
const COUNT = /^\d{1,15}$/;
/** The total reported for a counter that is not a count: more than any limit, so the key is refused. */
const EXHAUSTED = Number.MAX_SAFE_INTEGER;
/** Counters already logged as not counts (name and window), so a planted value is logged once, not per request. */
const LOGGED_LIMIT = 1000;

/** Slots are tokens with their own expiry, so a replica that dies holding one frees it after the TTL. */
const ACQUIRE = new RedisScript(`${REDIS_NOW_MS}
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`);

/** A window key lives this much past its window's end, so a replica with a slightly late clock still finds it. */
const WINDOW_SLACK_MS = 5_000;
const LOCAL = null;
/** How often slots whose release failed are retried (they also expire on their own after the slot TTL). */
const RELEASE_RETRY_MS = 1000;

/**
 * Per-key limits counted across the fleet with atomic Redis scripts. This replica also counts in its own memory and
 * holds the larger count, so Redis (unreachable, emptied, or written by someone else) can never make a replica grant
 * more than one quota itself: when Redis is unreachable (or a command times out) the memory count alone decides, and
 * the fleet grants up to one quota per replica until Redis is back, rather than refusing or stalling chat. A counter
 * that is not a non-negative integer counts as exhausted (fail closed) and is logged (deploy/README.md).
 */
export class RedisLimitCounters implements LimitCounters {
  readonly #connection: FleetConnection;
  readonly #keys: FleetKeys;
  readonly #local: MemoryLimitCounters;
  readonly #now: () => number;
  /** Per slot name, the tokens this replica holds (each also counted in memory); LOCAL marks one held in memory only (Redis was unreachable). */
  readonly #held = new Map<string, Array<string | typeof LOCAL>>();
  /** Redis slots whose release failed; retried when Redis is back (else they expire after their TTL). */
  #unreleased: Array<[string, string]> = [];
  #retryTimer: NodeJS.Timeout | undefined;
  readonly #logger: Logger | undefined;
  readonly #logged = new Set<string>();

  constructor(connection: FleetConnection, keys: FleetKeys, options: { now?: () => number; logger?: Logger } = {}) {
    this.#connection = connection;
    this.#keys = keys;
    const now = options.now ?? Date.now;
    this.#now = now;
    this.#logger = options.logger;
    this.#local = new MemoryLimitCounters(now);
    connection.onHealth((health) => {
      if (health === 'up') void this.#retryReleases();
    });
  }

  async add(name: string, amount: number, windowMs: number): Promise<WindowCount> {
    const { index, resetAt } = windowOf(this.#now(), windowMs);
    const local = await this.#local.add(name, amount, windowMs);
    if (!this.#connection.up) return local;
    try {
      const total = await ADD.run(this.#connection.client, [`${this.#keys.windowPrefix}${name}:${index}`], [amount, windowMs + WINDOW_SLACK_MS]);
      const count = Number(total);
      if (!Number.isSafeInteger(count) || count < 0) return this.#notACount(name, index, resetAt);
      return { total: Math.max(count, local.total), resetAt };
    } catch (err) {
      if (isReplyError(err)) return this.#notACount(name, index, resetAt);
      this.#connection.noteFailure(err);
      return local;
    }
  }

  async peek(name: string, windowMs: number): Promise<WindowCount> {
    const { index, resetAt } = windowOf(this.#now(), windowMs);
    const local = await this.#local.peek(name, windowMs);
    if (!this.#connection.up) return local;
    try {
      const value = await this.#connection.client.get(`${this.#keys.windowPrefix}${name}:${index}`);
      if (value !== null && !COUNT.test(value)) return this.#notACount(name, index, resetAt);
      return { total: Math.max(Number(value ?? 0), local.total), resetAt };
    } catch (err) {
      if (isReplyError(err)) return this.#notACount(name, index, resetAt);
      this.#connection.noteFailure(err);
      return local;
    }
  }

  /** A counter someone else wrote (a negative, a fraction, text, another type): exhausted, logged once per window by its kind only. */
  #notACount(name: string, index: number, resetAt: number): WindowCount {
    const seen = `${name}:${index}`;
    if (!this.#logged.has(seen)) {
      if (this.#logged.size >= LOGGED_LIMIT) this.#logged.clear();
      this.#logged.add(seen);
      this.#logger?.warn(
        { counter: name.split(':')[0] },
        'fleet: a limit counter in Redis is not a non-negative integer; the key is refused until the window ends',
      );
    }
    return { total: EXHAUSTED, resetAt };
  }

  async acquire(name: string, max: number, ttlMs: number): Promise<boolean> {
    // This replica's own slots first: whatever Redis holds, one replica never runs more than `max` at once.
    if (!(await this.#local.acquire(name, max))) return false;
    let token: string | typeof LOCAL = LOCAL;
    if (this.#connection.up) {
      token = randomUUID();
      try {
        const granted = await ACQUIRE.run(this.#connection.client, [this.#keys.slotPrefix + name], [max, ttlMs, token]);
        if (Number(granted) !== 1) {
          await this.#local.release(name);
          return false;
        }
      } catch (err) {
        if (isReplyError(err)) {
          // A slots key someone else made into another type: refused, as a counter that is not a count is.
          await this.#local.release(name);
          this.#notACount(name, 0, 0);
          return false;
        }
        this.#connection.noteFailure(err);
        // A timed-out script may still have run: free its token once Redis answers again.
        this.#releaseLater(this.#keys.slotPrefix + name, token);
        token = LOCAL;
      }
    }
    const held = this.#held.get(name);
    if (held === undefined) this.#held.set(name, [token]);
    else held.push(token);
    return true;
  }

  async release(name: string): Promise<void> {
    const held = this.#held.get(name);
    const token = held?.pop();
    if (held !== undefined && held.length === 0) this.#held.delete(name);
    if (token === undefined) return;
    await this.#local.release(name);
    if (token === LOCAL) return;
    const key = this.#keys.slotPrefix + name;
    if (!this.#connection.up) return this.#releaseLater(key, token);
    try {
      await this.#connection.client.zrem(key, token);
    } catch (err) {
      this.#connection.noteFailure(err);
      this.#releaseLater(key, token);
    }
  }

  #releaseLater(key: string, token: string): void {
    this.#unreleased.push([key, token]);
    this.#scheduleRetry();
  }

  #scheduleRetry(): void {
    if (this.#retryTimer !== undefined) return;
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      void this.#retryReleases();
    }, RELEASE_RETRY_MS).unref();
  }

  async #retryReleases(): Promise<void> {
    if (this.#unreleased.length === 0) return;
    if (!this.#connection.up) return this.#scheduleRetry();
    const pending = this.#unreleased;
    this.#unreleased = [];
    for (const [key, token] of pending) {
      await this.#connection.client.zrem(key, token).catch(() => this.#releaseLater(key, token));
    }
  }
}

/** Redis answered, with an error (a wrong type, a value INCRBY refuses): the data is bad, the connection is fine. */
function isReplyError(err: unknown): boolean {
  return err instanceof Error && err.name === 'ReplyError';
}
