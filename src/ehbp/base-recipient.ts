/**
 * The recipient of an HPKE base-mode context (RFC 9180 §5.1, §5.2, §5.3) for DHKEM(X25519, HKDF-SHA256) and
 * HKDF-SHA256 with AES-GCM, composed of node:crypto calls: OpenSSL's own DHKEM decapsulation, then the key
 * schedule on node:crypto's HMAC (src/ehbp/node-crypto-hpke.ts), then AES-GCM. It is the server's side of every
 * sealed request, synchronous from end to end: `@hpke/core` runs the same schedule through a dozen promises and
 * copies (bench/README.md, "EHBP on Node 24"). Tested against RFC 9180 Appendix A.1 and against `@hpke/core`'s
 * sender (test/ehbp/base-recipient.test.ts); keys, senders and the other modes stay `@hpke/core`'s.
 */
import { createSecretKey, decapsulate, type KeyObject } from 'node:crypto';
import { hkdfExpand, hkdfExtract, openAesGcm } from './node-crypto-hpke.ts';

const KEM_X25519_HKDF_SHA256 = 0x0020;
const KDF_HKDF_SHA256 = 0x0001;
const MODE_BASE = 0x00;
const NONCE_BYTES = 12;
const HASH_BYTES = 32;
const VERSION_LABEL = Buffer.from('HPKE-v1');

export interface BaseModeSuite {
  /** AES-128-GCM (AEAD id 1) or AES-256-GCM (id 2, EHBP's). */
  aead: 'aes-128-gcm' | 'aes-256-gcm';
}

const AEADS = { 'aes-128-gcm': { id: 0x0001, keyBytes: 16 }, 'aes-256-gcm': { id: 0x0002, keyBytes: 32 } } as const;

/**
 * What the key schedule needs that depends only on the suite and `info` (§5.1: suite_id, and
 * key_schedule_context = mode || psk_id_hash || info_hash for the default PSK): computed once per server.
 */
export class BaseModeSchedule {
  readonly #suiteId: Buffer;
  readonly #context: Buffer;
  readonly #aead: BaseModeSuite['aead'];

  constructor(suite: BaseModeSuite, info: Uint8Array) {
    this.#aead = suite.aead;
    this.#suiteId = Buffer.alloc(10);
    this.#suiteId.write('HPKE', 0, 'latin1');
    this.#suiteId.writeUInt16BE(KEM_X25519_HKDF_SHA256, 4);
    this.#suiteId.writeUInt16BE(KDF_HKDF_SHA256, 6);
    this.#suiteId.writeUInt16BE(AEADS[suite.aead].id, 8);
    const pskIdHash = this.labeledExtract(new Uint8Array(0), 'psk_id_hash', new Uint8Array(0));
    const infoHash = this.labeledExtract(new Uint8Array(0), 'info_hash', info);
    this.#context = Buffer.concat([Uint8Array.of(MODE_BASE), pskIdHash, infoHash]);
  }

  /**
   * SetupBaseR (§5.1.1): Decap(enc, skR) by OpenSSL, then KeySchedule. Throws on an encapsulated key OpenSSL
   * refuses (a low-order point gives an all-zero shared secret, which §7.1.4 requires refusing).
   */
  setup(recipientKey: KeyObject, enc: Uint8Array): BaseModeRecipient {
    const sharedSecret = decapsulate(recipientKey, enc);
    // secret = LabeledExtract(shared_secret, "secret", psk), the default psk being empty.
    const secret = this.labeledExtract(sharedSecret, 'secret', new Uint8Array(0));
    const key = this.labeledExpand(secret, 'key', this.#context, AEADS[this.#aead].keyBytes);
    const baseNonce = this.labeledExpand(secret, 'base_nonce', this.#context, NONCE_BYTES);
    const exporterSecret = this.labeledExpand(secret, 'exp', this.#context, HASH_BYTES);
    return new BaseModeRecipient(this, this.#aead, createSecretKey(key), baseNonce, exporterSecret);
  }

  /** LabeledExtract(salt, label, ikm) = Extract(salt, "HPKE-v1" || suite_id || label || ikm) (§4). */
  labeledExtract(salt: Uint8Array, label: string, ikm: Uint8Array): Uint8Array {
    return hkdfExtract(salt, Buffer.concat([VERSION_LABEL, this.#suiteId, Buffer.from(label, 'latin1'), ikm]));
  }

  /** LabeledExpand(prk, label, info, L) = Expand(prk, I2OSP(L, 2) || "HPKE-v1" || suite_id || label || info, L) (§4). */
  labeledExpand(prk: Uint8Array, label: string, info: Uint8Array, length: number): Uint8Array {
    const length2 = Buffer.alloc(2);
    length2.writeUInt16BE(length);
    return hkdfExpand(prk, Buffer.concat([length2, VERSION_LABEL, this.#suiteId, Buffer.from(label, 'latin1'), info]), length);
  }
}

/** One recipient context: opens the sender's messages in order (§5.2) and exports secrets from it (§5.3). */
export class BaseModeRecipient {
  #seq = 0;

  constructor(
    private readonly schedule: BaseModeSchedule,
    private readonly aead: BaseModeSuite['aead'],
    private readonly key: KeyObject,
    private readonly baseNonce: Uint8Array,
    private readonly exporterSecret: Uint8Array,
  ) {}

  /**
   * Open(aad, ct) with nonce = base_nonce XOR I2OSP(seq, Nn); the sequence number moves on only when a message
   * opened, so a forged message does not desynchronise the context. Throws when the tag does not verify.
   */
  open(sealed: Uint8Array, aad: Uint8Array = new Uint8Array(0)): Buffer {
    // A request has a handful of frames; 2^32 of them (a 12-byte nonce allows 2^96) is far beyond any body.
    if (this.#seq >= 2 ** 32) throw new RangeError('HPKE Open: message limit reached');
    const nonce = Buffer.from(this.baseNonce);
    nonce.writeUInt32BE((nonce.readUInt32BE(NONCE_BYTES - 4) ^ this.#seq) >>> 0, NONCE_BYTES - 4);
    const opened = openAesGcm(this.aead, this.key, nonce, sealed, aad);
    this.#seq++;
    return opened;
  }

  /** Export(exporter_context, L) = LabeledExpand(exporter_secret, "sec", exporter_context, L) (§5.3). */
  export(exporterContext: Uint8Array, length: number): Uint8Array {
    return this.schedule.labeledExpand(this.exporterSecret, 'sec', exporterContext, length);
  }
}
