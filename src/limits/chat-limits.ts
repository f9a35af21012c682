import type { Caller } from '../auth/bearer.ts';
import { HttpError } from '../protocol/errors.ts';
import type { AdmissionLimits, ChatAdmission, Verdict } from './admission.ts';

export type ChatLimitsConfig = AdmissionLimits;

function tooMany(message: string, retryAfterS: number, headers: Record<string, string> = {}): HttpError {
  return new HttpError('rate_limit_exceeded', message, { headers: { ...headers, 'retry-after': String(Math.max(1, Math.ceil(retryAfterS))) } });
}

/**
 * docs/configuration.md#sigilyaml (`limits`): concurrency overall (this replica) and per key, request and token rates per key.
 * `admit` runs before the request is forwarded and returns the function that releases its slots and
 * charges the tokens it used. The counting is `ChatAdmission`'s (this process's, or the workers' primary's);
 * what a client sees (headers, refusals) is made here.
 */
export class ChatLimits {
  readonly #config: ChatLimitsConfig;
  readonly #admission: ChatAdmission;
  readonly #now: () => number;

  constructor(config: ChatLimitsConfig, admission: ChatAdmission, now: () => number = Date.now) {
    this.#config = config;
    this.#admission = admission;
    this.#now = now;
  }

  /** Takes this request's slots and returns what the response should carry; a refusal is thrown as a 429. */
  async admit(caller: Caller): Promise<Admission> {
    const verdict = await this.#admission.admit(caller.keyHash);
    const headers = this.#rateHeaders(verdict);
    if (!verdict.admitted) throw this.#refusal(verdict, headers);
    let released = false;
    return {
      headers,
      release: (tokensUsed: number) => {
        if (released) return;
        released = true;
        this.#admission.finish(caller.keyHash, tokensUsed);
      },
    };
  }

  #rateHeaders(verdict: Verdict): Record<string, string> {
    if (verdict.rate === undefined) return {};
    const limit = this.#config.requests_per_minute;
    return {
      'x-ratelimit-limit': String(limit),
      'x-ratelimit-remaining': String(Math.max(0, limit - verdict.rate.total)),
      'x-ratelimit-reset': String(Math.ceil((verdict.rate.resetAt - this.#now()) / 1000)),
    };
  }

  #refusal(verdict: Verdict & { admitted: false }, headers: Record<string, string>): HttpError {
    const c = this.#config;
    switch (verdict.refusal) {
      case 'concurrent':
        return tooMany('This server is at its limit of concurrent requests; retry shortly.', 1);
      case 'requests_per_minute':
        return tooMany(`Rate limit reached: ${c.requests_per_minute} requests per minute for this API key.`, Number(headers['x-ratelimit-reset']), headers);
      case 'tokens_per_minute':
        return tooMany(
          `Rate limit reached: ${c.tokens_per_minute} tokens per minute for this API key.`,
          ((verdict.resetAt ?? this.#now()) - this.#now()) / 1000,
          headers,
        );
      case 'concurrent_per_key':
        return tooMany(`Too many concurrent requests for this API key (limit ${c.max_concurrent_per_key}).`, 1, headers);
    }
  }
}

export interface Admission {
  /** Rate-limit headers for the response (`x-ratelimit-*`), empty when no request rate is set. */
  headers: Readonly<Record<string, string>>;
  /** Frees the slots and charges the tokens the exchange used; only the first call counts. */
  release(tokensUsed: number): void;
}
