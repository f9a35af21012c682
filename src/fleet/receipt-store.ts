import type { Logger } from '../logger/logger.ts';
import type { Jwks } from '../protocol/attestation.ts';
import { HttpError } from '../protocol/errors.ts';
import { namesReceipt, openReceipt, receiptIndex, sealReceipt } from '../receipts/sealed-at-rest.ts';
import { MemoryReceiptStore, type ReceiptOwner, type ReceiptStore } from '../receipts/store.ts';
import { importJwks, type ImportedJwks } from '../verify/jwks.ts';
import { verifyCompactJws } from '../verify/jws.ts';
import type { FleetConnection } from './connection.ts';
import type { FleetKeys } from './redis-keys.ts';

/**
 * Receipts shared by the fleet: SET with the retention as PX, so GET /v1/receipts/{id} answers from
 * any replica and Redis forgets them on time. What Redis holds is sealed for the receipt's owner
 * (docs/receipts.md, "Receipts at rest"): the key is an HMAC of the id and the value AES-256-GCM, both
 * under keys from the caller's API key, which Sigil keeps only as a hash; whoever runs Redis reads
 * neither the receipt nor whose it is. A receipt read back is served only when it names the id asked
 * for and its ES256 signature verifies under a key the fleet admits now (its JWKS). Every receipt is
 * also kept in this replica's memory store, so that while Redis is unreachable a client still gets the
 * receipts this replica issued.
 */
export class RedisReceiptStore implements ReceiptStore {
  readonly #connection: FleetConnection;
  readonly #keys: FleetKeys;
  readonly #retentionMs: number;
  readonly #local: MemoryReceiptStore;
  readonly #jwks: () => Jwks;
  readonly #logger: Logger;
  /** The admitted keys, imported once per JWKS view (the registry replaces the view when it changes). */
  #imported: { view: Jwks; keys: Promise<ImportedJwks> } | undefined;

  constructor(connection: FleetConnection, keys: FleetKeys, options: { retentionS: number; maxEntries: number; jwks: () => Jwks; logger: Logger }) {
    this.#connection = connection;
    this.#keys = keys;
    this.#retentionMs = options.retentionS * 1000;
    this.#local = new MemoryReceiptStore(options);
    this.#jwks = options.jwks;
    this.#logger = options.logger;
  }

  async #admittedKeys(): Promise<ImportedJwks> {
    const view = this.#jwks();
    if (this.#imported?.view !== view) this.#imported = { view, keys: importJwks(view) };
    return this.#imported.keys;
  }

  /** What rests outside the enclave is checked before it is served: its id, then its signature by an admitted key. */
  async #checked(jws: string, receiptId: string): Promise<string> {
    let refusal: string | undefined;
    if (!namesReceipt(jws, receiptId)) refusal = 'receipt_id';
    else {
      try {
        verifyCompactJws(jws, (await this.#admittedKeys()).keys);
      } catch {
        refusal = 'signature';
      }
    }
    if (refusal === undefined) return jws;
    this.#logger.warn({ failed: refusal }, 'fleet: a receipt read from Redis failed its check and was not served');
    throw new HttpError(
      'stored_receipt_invalid',
      'The stored receipt failed its check (its id, or its signature by a key this service admits) and is not served.',
    );
  }

  async put(receiptId: string, owner: ReceiptOwner, jws: string): Promise<void> {
    await this.#local.put(receiptId, owner, jws);
    if (!this.#connection.up) return;
    const index = receiptIndex(owner, receiptId);
    await this.#connection.client
      .set(this.#keys.receiptPrefix + index, sealReceipt(owner, index, jws), 'PX', this.#retentionMs)
      .catch((err: unknown) => this.#connection.noteFailure(err));
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
    // Opening proves the owner's key sealed it at this index: not theirs, moved or altered, it is unknown to them.
    const jws = openReceipt(owner, index, value);
    return jws === undefined ? undefined : this.#checked(jws, receiptId);
  }
}
