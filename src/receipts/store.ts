/** Where finished message receipts wait to be fetched by GET /v1/receipts/{id}. */
export interface ReceiptStore {
  put(receiptId: string, ownerKeyHash: string, jws: string): Promise<void>;
  /** The receipt, only for the key that made the request; undefined when unknown, expired or not theirs. */
  get(receiptId: string, ownerKeyHash: string): Promise<string | undefined>;
}

interface Entry {
  owner: string;
  jws: string;
  expiresAt: number;
}

/**
 * In-memory store, bounded in time and count. Retention is the same for every entry, so insertion
 * order is expiry order: expired and surplus entries are always at the front of the Map.
 */
export class MemoryReceiptStore implements ReceiptStore {
  readonly #entries = new Map<string, Entry>();
  readonly #retentionMs: number;
  readonly #maxEntries: number;
  readonly #now: () => number;

  constructor(options: { retentionS: number; maxEntries: number; now?: () => number }) {
    this.#retentionMs = options.retentionS * 1000;
    this.#maxEntries = options.maxEntries;
    this.#now = options.now ?? Date.now;
  }

  get size(): number {
    return this.#entries.size;
  }

  async put(receiptId: string, ownerKeyHash: string, jws: string): Promise<void> {
    const now = this.#now();
    this.#evict(now);
    if (this.#entries.size >= this.#maxEntries) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    this.#entries.set(receiptId, { owner: ownerKeyHash, jws, expiresAt: now + this.#retentionMs });
  }

  async get(receiptId: string, ownerKeyHash: string): Promise<string | undefined> {
    const entry = this.#entries.get(receiptId);
    if (entry === undefined || entry.owner !== ownerKeyHash) return undefined;
    if (entry.expiresAt <= this.#now()) {
      this.#entries.delete(receiptId);
      return undefined;
    }
    return entry.jws;
  }

  #evict(now: number): void {
    for (const [id, entry] of this.#entries) {
      if (entry.expiresAt > now) return;
      this.#entries.delete(id);
    }
  }
}
