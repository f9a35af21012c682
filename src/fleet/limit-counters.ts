import { randomUUID } from 'node:crypto';
import { MemoryLimitCounters, windowOf, type LimitCounters, type WindowCount } from '../limits/counters.ts';
import type { FleetConnection } from './connection.ts';
import type { FleetKeys } from './redis-keys.ts';
import { REDIS_NOW_MS, RedisScript } from './script.ts';

/** INCRBY, and the expiry set once per window key (so a window never outlives its end by much). */
const ADD = new RedisScript(`local total = redis.call('INCRBY', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return total`);

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
 * Per-key limits counted across the fleet with atomic Redis scripts. When Redis is unreachable (or
 * a command times out) each call falls back to this replica's memory counters: the fleet then grants
 * up to one quota per replica until Redis is back, rather than refusing or stalling chat.
 */
export class RedisLimitCounters implements LimitCounters {
  readonly #connection: FleetConnection;
  readonly #keys: FleetKeys;
  readonly #local: MemoryLimitCounters;
  readonly #now: () => number;
  /** Per slot name, the tokens this replica holds; LOCAL marks a slot taken from the local counters. */
  readonly #held = new Map<string, Array<string | typeof LOCAL>>();
  /** Redis slots whose release failed; retried when Redis is back (else they expire after their TTL). */
  #unreleased: Array<[string, string]> = [];
  #retryTimer: NodeJS.Timeout | undefined;

  constructor(connection: FleetConnection, keys: FleetKeys, now: () => number = Date.now) {
    this.#connection = connection;
    this.#keys = keys;
    this.#now = now;
    this.#local = new MemoryLimitCounters(now);
    connection.onHealth((health) => {
      if (health === 'up') void this.#retryReleases();
    });
  }

  async add(name: string, amount: number, windowMs: number): Promise<WindowCount> {
    const { index, resetAt } = windowOf(this.#now(), windowMs);
    if (!this.#connection.up) return this.#local.add(name, amount, windowMs);
    try {
      const total = await ADD.run(this.#connection.client, [`${this.#keys.windowPrefix}${name}:${index}`], [amount, windowMs + WINDOW_SLACK_MS]);
      return { total: Number(total), resetAt };
    } catch (err) {
      this.#connection.noteFailure(err);
      return this.#local.add(name, amount, windowMs);
    }
  }

  async peek(name: string, windowMs: number): Promise<WindowCount> {
    const { index, resetAt } = windowOf(this.#now(), windowMs);
    if (!this.#connection.up) return this.#local.peek(name, windowMs);
    try {
      const total = await this.#connection.client.get(`${this.#keys.windowPrefix}${name}:${index}`);
      return { total: Number(total ?? 0), resetAt };
    } catch (err) {
      this.#connection.noteFailure(err);
      return this.#local.peek(name, windowMs);
    }
  }

  async acquire(name: string, max: number, ttlMs: number): Promise<boolean> {
    let token: string | typeof LOCAL = LOCAL;
    if (this.#connection.up) {
      token = randomUUID();
      try {
        const granted = await ACQUIRE.run(this.#connection.client, [this.#keys.slotPrefix + name], [max, ttlMs, token]);
        if (Number(granted) !== 1) return false;
      } catch (err) {
        this.#connection.noteFailure(err);
        // A timed-out script may still have run: free its token once Redis answers again.
        this.#releaseLater(this.#keys.slotPrefix + name, token);
        token = LOCAL;
      }
    }
    if (token === LOCAL && !(await this.#local.acquire(name, max))) return false;
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
    if (token === LOCAL) return this.#local.release(name);
    const key = this.#keys.slotPrefix + name;
    try {
      if (!this.#connection.up) throw new Error('redis down');
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
