import { namesReceipt, openReceipt, receiptIndex, sealReceipt } from '../receipts/sealed-at-rest.ts';
import { MemoryReceiptStore, type ReceiptOwner, type ReceiptStore } from '../receipts/store.ts';
import type { FleetConnection } from './connection.ts';
import type { FleetKeys } from './redis-keys.ts';

/**
 * Receipts shared by the fleet: SET with the retention as PX, so GET /v1/receipts/{id} answers from
 * any replica and Redis forgets them on time. What Redis holds is sealed for the receipt's owner
 * (docs/receipts.md, "Receipts at rest"): the key is an HMAC of the id and the value AES-256-GCM, both
 * under keys from the caller's API key, which Sigil keeps only as a hash; whoever runs Redis reads
 * neither the receipt nor whose it is. Every receipt is also kept in this replica's memory store, so
 * that while Redis is unreachable a client still gets the receipts this replica issued.
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

  async put(receiptId: string, owner: ReceiptOwner, jws: string): Promise<void> {
    await this.#local.put(receiptId, owner, jws);
    if (!this.#connection.up) return;
    const index = receiptIndex(owner, receiptId);
    await this.#connection.client.set(this.#keys.receiptPrefix + index, sealReceipt(owner, index, jws), 'PX', this.#retentionMs).catch((err: unknown) => this.#connection.noteFailure(err));
  }

  async get(receiptId: string, owner: ReceiptOwner): Promise<string | undefined> {
    const local = await this.#local.get(receiptId, owner);
    if (local !== undefined || !this.#connection.up) return local;
    const index = receiptIndex(owner, receiptId);
    let value: string | null;
    try {
      value = await this.#connection.client.get(this.#keys.receiptPrefix + index);
    } catch (err) {
      this.#connection.noteFailure(err);
      return undefined;
    }
    if (value === null) return undefined;
    // Opening proves the owner's key sealed it at this index; the id inside must be the one asked for.
    const jws = openReceipt(owner, index, value);
    return jws !== undefined && namesReceipt(jws, receiptId) ? jws : undefined;
  }
}
