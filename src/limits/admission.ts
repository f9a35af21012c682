import type { LimitCounters } from './counters.ts';

const MINUTE = 60_000;
/** A concurrency slot whose holder vanished (a crashed replica) is freed after this long. */
const SLOT_TTL_MS = 15 * MINUTE;

/** The request-rate window a request was counted in, for its `x-ratelimit-*` headers. */
export interface RateWindow {
  total: number;
  /** Epoch ms when the window ends. */
  resetAt: number;
}

/** Which limit refused a request: the replica's concurrency, or one of the key's own. */
export type Refusal = 'concurrent' | 'requests_per_minute' | 'tokens_per_minute' | 'concurrent_per_key';

export type Verdict =
  | { admitted: true; rate?: RateWindow }
  | { admitted: false; refusal: Refusal; rate?: RateWindow; /** Epoch ms the token window ends (`tokens_per_minute`). */ resetAt?: number };

export interface AdmissionLimits {
  max_concurrent: number;
  max_concurrent_per_key: number;
  /** Per key and minute; 0 = no limit. */
  requests_per_minute: number;
  /** Prompt plus completion tokens per key and minute, as the engine reports them; 0 = no limit. */
  tokens_per_minute: number;
}

/**
 * The state behind chat limits, decided in one place: in a single process, its own counters; with workers,
 * the primary's, reached by one call per request to admit and one message (no answer awaited) to finish,
 * so a quota is exact across workers at the cost of one IPC round trip per request.
 */
export interface ChatAdmission {
  /** Takes the request's slots for the key `keyHash`; a refusal gives back whatever it took. */
  admit(keyHash: string): Promise<Verdict>;
  /** Frees an admitted request's slots and charges the tokens it used. */
  finish(keyHash: string, tokensUsed: number): void;
}

/**
 * Admission counted on `LimitCounters` (in memory, or the fleet's in Redis). Increment, then check: two
 * requests racing past a slow shared counter cannot both get the last slot.
 */
export class CountedAdmission implements ChatAdmission {
  readonly #limits: AdmissionLimits;
  readonly #counters: LimitCounters;
  #inFlight = 0;

  constructor(limits: AdmissionLimits, counters: LimitCounters) {
    this.#limits = limits;
    this.#counters = counters;
  }

  /** Requests admitted and not finished, in this replica. */
  get inFlight(): number {
    return this.#inFlight;
  }

  async admit(keyHash: string): Promise<Verdict> {
    const c = this.#limits;
    this.#inFlight++;
    let rate: RateWindow | undefined;
    try {
      if (this.#inFlight > c.max_concurrent) return this.#refuse({ admitted: false, refusal: 'concurrent' });
      if (c.requests_per_minute > 0) {
        rate = await this.#counters.add(`rpm:${keyHash}`, 1, MINUTE);
        if (rate.total > c.requests_per_minute) return this.#refuse({ admitted: false, refusal: 'requests_per_minute', rate });
      }
      if (c.tokens_per_minute > 0) {
        const { total, resetAt } = await this.#counters.peek(`tpm:${keyHash}`, MINUTE);
        if (total >= c.tokens_per_minute) return this.#refuse({ admitted: false, refusal: 'tokens_per_minute', resetAt, ...(rate && { rate }) });
      }
      if (!(await this.#counters.acquire(`conc:${keyHash}`, c.max_concurrent_per_key, SLOT_TTL_MS)))
        return this.#refuse({ admitted: false, refusal: 'concurrent_per_key', ...(rate && { rate }) });
    } catch (err) {
      this.#inFlight--;
      throw err;
    }
    return rate === undefined ? { admitted: true } : { admitted: true, rate };
  }

  finish(keyHash: string, tokensUsed: number): void {
    this.#inFlight--;
    void this.#counters.release(`conc:${keyHash}`).catch(() => undefined);
    if (this.#limits.tokens_per_minute > 0 && tokensUsed > 0) void this.#counters.add(`tpm:${keyHash}`, tokensUsed, MINUTE).catch(() => undefined);
  }

  #refuse(verdict: Verdict): Verdict {
    this.#inFlight--;
    return verdict;
  }
}
