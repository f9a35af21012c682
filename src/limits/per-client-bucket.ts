/**
 * Token buckets, one per client (its API key's hash, else its address), so one client's burst spends
 * only its own allowance. At most `maxClients` are tracked: a new client past that replaces the one
 * seen longest ago (its bucket was full again by then, or it is the flood itself).
 */
export class PerClientBuckets {
  readonly #buckets = new Map<string, { tokens: number; at: number }>();
  readonly #burst: number;
  readonly #perS: number;
  readonly #maxClients: number;
  readonly #now: () => number;

  constructor(options: { burst: number; perS: number; maxClients: number; now?: () => number }) {
    this.#burst = options.burst;
    this.#perS = options.perS;
    this.#maxClients = options.maxClients;
    this.#now = options.now ?? Date.now;
  }

  /** Takes one token from `client`'s bucket; false when it has none left. */
  take(client: string): boolean {
    const now = this.#now();
    let bucket = this.#buckets.get(client);
    if (bucket === undefined) {
      if (this.#buckets.size >= this.#maxClients) this.#buckets.delete(this.#buckets.keys().next().value!);
      bucket = { tokens: this.#burst, at: now };
    } else {
      this.#buckets.delete(client);
      bucket.tokens = Math.min(this.#burst, bucket.tokens + ((now - bucket.at) / 1000) * this.#perS);
      bucket.at = now;
    }
    // Re-inserted: the Map's order is the order clients were last seen.
    this.#buckets.set(client, bucket);
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }
}
