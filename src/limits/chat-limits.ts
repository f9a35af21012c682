import type { Caller } from '../auth/bearer.ts';
import { HttpError } from '../protocol/errors.ts';
import type { LimitCounters } from './counters.ts';

export interface ChatLimitsConfig {
  max_concurrent: number;
  max_concurrent_per_key: number;
  /** Per key and minute; 0 = no limit. */
  requests_per_minute: number;
  /** Prompt plus completion tokens per key and minute, as the engine reports them; 0 = no limit. */
  tokens_per_minute: number;
}

const MINUTE = 60_000;
/** A concurrency slot whose holder vanished (a crashed replica) is freed after this long. */
const SLOT_TTL_MS = 15 * MINUTE;

function tooMany(message: string, retryAfterS: number, headers: Record<string, string> = {}): HttpError {
  return new HttpError('rate_limit_exceeded', message, { headers: { ...headers, 'retry-after': String(Math.max(1, Math.ceil(retryAfterS))) } });
}

/**
 * docs/configuration.md#sigilyaml (`limits`): concurrency overall (this replica) and per key, request and token rates per key.
 * `admit` runs before the request is forwarded and returns the function that releases its slots and
 * charges the tokens it used.
 */
export class ChatLimits {
  readonly #config: ChatLimitsConfig;
  /** Counters shared by every replica (per-key quotas). */
  readonly #shared: LimitCounters;
  #inFlight = 0;

  constructor(config: ChatLimitsConfig, shared: LimitCounters) {
    this.#config = config;
    this.#shared = shared;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  /**
   * Takes this request's slots (increment, then check: two requests racing past a slow shared counter
   * cannot both get the last slot) and returns what the response should carry. Every refusal gives
   * back what it took.
   */
  async admit(caller: Caller): Promise<Admission> {
    const c = this.#config;
    this.#inFlight++;
    let slotTaken = false;
    const slot = `conc:${caller.keyHash}`;
    const giveBack = () => {
      this.#inFlight--;
      if (slotTaken) void this.#shared.release(slot).catch(() => undefined);
    };
    try {
      if (this.#inFlight > c.max_concurrent) throw tooMany('This server is at its limit of concurrent requests; retry shortly.', 1);
      const headers: Record<string, string> = {};
      if (c.requests_per_minute > 0) {
        const { total, resetAt } = await this.#shared.add(`rpm:${caller.keyHash}`, 1, MINUTE);
        const resetS = Math.ceil((resetAt - Date.now()) / 1000);
        headers['x-ratelimit-limit'] = String(c.requests_per_minute);
        headers['x-ratelimit-remaining'] = String(Math.max(0, c.requests_per_minute - total));
        headers['x-ratelimit-reset'] = String(resetS);
        if (total > c.requests_per_minute) throw tooMany(`Rate limit reached: ${c.requests_per_minute} requests per minute for this API key.`, resetS, headers);
      }
      if (c.tokens_per_minute > 0) {
        const { total, resetAt } = await this.#shared.peek(`tpm:${caller.keyHash}`, MINUTE);
        if (total >= c.tokens_per_minute) {
          throw tooMany(`Rate limit reached: ${c.tokens_per_minute} tokens per minute for this API key.`, (resetAt - Date.now()) / 1000, headers);
        }
      }
      slotTaken = await this.#shared.acquire(slot, c.max_concurrent_per_key, SLOT_TTL_MS);
      if (!slotTaken) throw tooMany(`Too many concurrent requests for this API key (limit ${c.max_concurrent_per_key}).`, 1, headers);
      let released = false;
      const release = (tokensUsed: number) => {
        if (released) return;
        released = true;
        giveBack();
        if (c.tokens_per_minute > 0 && tokensUsed > 0) void this.#shared.add(`tpm:${caller.keyHash}`, tokensUsed, MINUTE).catch(() => undefined);
      };
      return { headers, release };
    } catch (err) {
      giveBack();
      throw err;
    }
  }
}

export interface Admission {
  /** Rate-limit headers for the response (`x-ratelimit-*`), empty when no request rate is set. */
  headers: Readonly<Record<string, string>>;
  /** Frees the slots and charges the tokens the exchange used; only the first call counts. */
  release(tokensUsed: number): void;
}
