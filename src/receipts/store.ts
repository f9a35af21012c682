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

/** A queue cut when this many ids at its front are spent and they are half of it: each id is copied at most once more. */
const COMPACT_AFTER = 1024;

/**
 * Receipt ids, oldest first. The front leaves by moving a head index: an array's `splice(0, 1)` moves every id behind
 * it (57 us a put at 10,000 receipts per key), and a Map's `keys().next()` walks past every entry deleted since it
 * was last rehashed (10 us at 100,000).
 */
class IdQueue {
  #ids: string[] = [];
  #head = 0;

  get size(): number {
    return this.#ids.length - this.#head;
  }

  push(id: string): void {
    this.#ids.push(id);
  }

  /** The oldest id, undefined when empty. */
  peek(): string | undefined {
    return this.#head < this.#ids.length ? this.#ids[this.#head] : undefined;
  }

  shift(): void {
    this.#ids[this.#head++] = '';
    if (this.#head >= COMPACT_AFTER && 2 * this.#head >= this.#ids.length) {
      this.#ids = this.#ids.slice(this.#head);
      this.#head = 0;
    }
  }

  /** Removes `id`: at the front in constant time, elsewhere (rare) by a search. */
  remove(id: string): void {
    if (this.peek() === id) return this.shift();
    const at = this.#ids.indexOf(id, this.#head);
    if (at !== -1) this.#ids.splice(at, 1);
  }

  /** Keeps only the ids `keep` says, in order. */
  retain(keep: (id: string) => boolean): void {
    this.#ids = this.#ids.slice(this.#head).filter(keep);
    this.#head = 0;
  }
}

/**
 * In-memory store (inside the enclave), bounded in time, in count, and in count per API key (one key's traffic cannot
 * evict every other key's receipts). Retention is the same for every entry, so insertion order is
 * expiry order: expired and surplus entries are always at the front of the Map and of their key's queue.
 */
export class MemoryReceiptStore implements ReceiptStore {
  readonly #entries = new Map<string, Entry>();
  /** Every id put, oldest first; ids deleted since (per key, or expired on a read) are skipped when they reach the front. */
  readonly #order = new IdQueue();
  /** Each key's receipt ids, oldest first. */
  readonly #byOwner = new Map<string, IdQueue>();
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
    const mine = this.#byOwner.get(ownerKeyHash) ?? new IdQueue();
    if (mine.size >= this.#maxPerKey) this.#delete(mine.peek()!);
    if (this.#entries.size >= this.#maxEntries) this.#delete(this.#oldest()!);
    this.#entries.set(receiptId, { owner: ownerKeyHash, jws, expiresAt: now + this.#retentionMs });
    mine.push(receiptId);
    this.#byOwner.set(ownerKeyHash, mine);
    this.#order.push(receiptId);
    // Ids deleted away from the front stay in the order until they reach it: cut them once they outnumber the live ones.
    if (this.#order.size > 2 * this.#entries.size + COMPACT_AFTER) this.#order.retain((id) => this.#entries.has(id));
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

  /** The oldest id still stored; the deleted ones before it leave the order. */
  #oldest(): string | undefined {
    for (let id = this.#order.peek(); id !== undefined; id = this.#order.peek()) {
      if (this.#entries.has(id)) return id;
      this.#order.shift();
    }
    return undefined;
  }

  #evict(now: number): void {
    for (let id = this.#oldest(); id !== undefined; id = this.#oldest()) {
      if (this.#entries.get(id)!.expiresAt > now) return;
      this.#delete(id);
    }
  }

  #delete(receiptId: string): void {
    const entry = this.#entries.get(receiptId);
    if (entry === undefined) return;
    this.#entries.delete(receiptId);
    const queue = this.#byOwner.get(entry.owner)!;
    // Deletions come oldest first, so this is nearly always the front of the queue.
    queue.remove(receiptId);
    if (queue.size === 0) this.#byOwner.delete(entry.owner);
  }
}
