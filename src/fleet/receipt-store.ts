import { MemoryReceiptStore, type ReceiptStore } from '../receipts/store.ts';
import type { FleetConnection } from './connection.ts';
import type { FleetKeys } from './redis-keys.ts';

interface StoredReceipt {
  owner: string;
  jws: string;
}

/**
 * Receipts shared by the fleet: SET with the retention as PX, so GET /v1/receipts/{id} answers from
 * any replica and Redis forgets them on time. Every receipt is also kept in this replica's memory
 * store, so that while Redis is unreachable a client still gets the receipts this replica issued.
 */
export class RedisReceiptStore implements ReceiptStore {
  readonly #connection: FleetConnection;
  readonly #keys: FleetKeys;
  readonly #retentionMs: number;
  readonly #local: MemoryReceiptStore;

  constructor(connection: FleetConnection, keys: FleetKeys, options: { retentionS: number; maxEntries: number }) {
    this.#connection = connection;
    this.#keys = keys;
    this.#retentionMs = options.retentionS * 1000;
    this.#local = new MemoryReceiptStore(options);
  }

  async put(receiptId: string, ownerKeyHash: string, jws: string): Promise<void> {
    await this.#local.put(receiptId, ownerKeyHash, jws);
    if (!this.#connection.up) return;
    const value: StoredReceipt = { owner: ownerKeyHash, jws };
    await this.#connection.client.set(this.#keys.receiptPrefix + receiptId, JSON.stringify(value), 'PX', this.#retentionMs).catch((err: unknown) => this.#connection.noteFailure(err));
  }

  async get(receiptId: string, ownerKeyHash: string): Promise<string | undefined> {
    const local = await this.#local.get(receiptId, ownerKeyHash);
    if (local !== undefined || !this.#connection.up) return local;
    let text: string | null;
    try {
      text = await this.#connection.client.get(this.#keys.receiptPrefix + receiptId);
    } catch (err) {
      this.#connection.noteFailure(err);
      return undefined;
    }
    if (text === null) return undefined;
    let stored: Partial<StoredReceipt>;
    try {
      stored = JSON.parse(text) as Partial<StoredReceipt>;
    } catch {
      return undefined;
    }
    return stored.owner === ownerKeyHash && typeof stored.jws === 'string' ? stored.jws : undefined;
  }
}
