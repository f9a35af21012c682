/** What a replay window answers for one sealed request's encapsulated key. */
export type ReplayVerdict = 'fresh' | 'replayed' | 'full';

/**
 * Remembers the encapsulated keys of sealed (EHBP) requests for a window, so a captured request sent
 * again is refused before the engine runs (docs/ehbp.md, "Replays").
 */
export interface ReplayWindow {
  /** Records `id` (the SHA-256 of an encapsulated key, hex) and says whether it was already seen. */
  claim(id: string): Promise<ReplayVerdict>;
}

/**
 * In-memory window, bounded in entries. Every entry lives the same time, so insertion order is expiry
 * order and the expired are always at the front. Full, it refuses rather than forget a key early: an
 * evicted key could be replayed.
 */
export class MemoryReplayWindow implements ReplayWindow {
  readonly #seen = new Map<string, number>();
  readonly #windowMs: number;
  readonly #maxEntries: number;
  readonly #now: () => number;

  constructor(options: { windowS: number; maxEntries: number; now?: () => number }) {
    this.#windowMs = options.windowS * 1000;
    this.#maxEntries = options.maxEntries;
    this.#now = options.now ?? Date.now;
  }

  get size(): number {
    return this.#seen.size;
  }

  async claim(id: string): Promise<ReplayVerdict> {
    return this.claimNow(id);
  }

  /** The same, synchronously: the fleet's fallback while Redis is unreachable. */
  claimNow(id: string): ReplayVerdict {
    const now = this.#now();
    for (const [seen, expiresAt] of this.#seen) {
      if (expiresAt > now) break;
      this.#seen.delete(seen);
    }
    if (this.#seen.has(id)) return 'replayed';
    if (this.#seen.size >= this.#maxEntries) return 'full';
    this.#seen.set(id, now + this.#windowMs);
    return 'fresh';
  }
}
