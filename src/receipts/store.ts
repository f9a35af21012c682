import type { ReceiptOwner } from './sealed-at-rest.ts';

export type { ReceiptOwner } from './sealed-at-rest.ts';

/** Where finished message receipts wait to be fetched by GET /v1/receipts/{id}. */
export interface ReceiptStore {
  put(receiptId: string, owner: ReceiptOwner, jws: string): Promise<void>;
  /** The receipt, only for the key that made the request; undefined when unknown, expired or not theirs. */
  get(receiptId: string, owner: ReceiptOwner): Promise<string | undefined>;
}

interface Entry {
  owner: string;
  jws: string;
  expiresAt: number;
}

/**
 * In-memory store (inside the enclave), bounded in time, in count, and in count per API key (one key's traffic cannot
 * evict every other key's receipts). Retention is the same for every entry, so insertion order is
 * expiry order: expired and surplus entries are always at the front of the Map and of their key's queue.
 */
export class MemoryReceiptStore implements ReceiptStore {
  readonly #entries = new Map<string, Entry>();
  /** Each key's receipt ids, oldest first. */
  readonly #byOwner = new Map<string, string[]>();
  readonly #retentionMs: number;
  readonly #maxEntries: number;
  readonly #maxPerKey: number;
  readonly #now: () => number;

  constructor(options: { retentionS: number; maxEntries: number; maxPerKey?: number; now?: () => number }) {
    this.#retentionMs = options.retentionS * 1000;
    this.#maxEntries = options.maxEntries;
    this.#maxPerKey = options.maxPerKey ?? options.maxEntries;
    this.#now = options.now ?? Date.now;
  }

  get size(): number {
    return this.#entries.size;
  }

  async put(receiptId: string, owner: ReceiptOwner, jws: string): Promise<void> {
    const ownerKeyHash = owner.keyHash;
    const now = this.#now();
    this.#evict(now);
    const mine = this.#byOwner.get(ownerKeyHash) ?? [];
    if (mine.length >= this.#maxPerKey) this.#delete(mine[0]!);
    if (this.#entries.size >= this.#maxEntries) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#delete(oldest.value);
    }
    this.#entries.set(receiptId, { owner: ownerKeyHash, jws, expiresAt: now + this.#retentionMs });
    mine.push(receiptId);
    this.#byOwner.set(ownerKeyHash, mine);
  }

  async get(receiptId: string, owner: ReceiptOwner): Promise<string | undefined> {
    const entry = this.#entries.get(receiptId);
    if (entry === undefined || entry.owner !== owner.keyHash) return undefined;
    if (entry.expiresAt <= this.#now()) {
      this.#delete(receiptId);
      return undefined;
    }
    return entry.jws;
  }

  #evict(now: number): void {
    for (const [id, entry] of this.#entries) {
      if (entry.expiresAt > now) return;
      this.#delete(id);
    }
  }

  #delete(receiptId: string): void {
    const entry = this.#entries.get(receiptId);
    if (entry === undefined) return;
    this.#entries.delete(receiptId);
    const queue = this.#byOwner.get(entry.owner)!;
    // Deletions come oldest first, so this is nearly always the front of the queue.
    const at = queue[0] === receiptId ? 0 : queue.indexOf(receiptId);
    queue.splice(at, 1);
    if (queue.length === 0) this.#byOwner.delete(entry.owner);
  }
}
