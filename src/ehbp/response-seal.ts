import { createCipheriv, createSecretKey, type KeyObject } from 'node:crypto';
import { hkdfExpand, hkdfExtract } from './node-crypto-hpke.ts';

/** The AES-256-GCM key and nonce base of one response (the EHBP specification §4.4, as OHTTP RFC 9458 derives them). */
export interface ResponseKeys {
  key: Buffer;
  nonceBase: Buffer;
}

const TAG_BYTES = 16;

/** salt = enc || response_nonce; prk = Extract(salt, secret); key = Expand(prk, "key", 32); nonce = Expand(prk, "nonce", 12). */
export function deriveResponseKeys(exportedSecret: Uint8Array, requestEnc: Uint8Array, responseNonce: Uint8Array): ResponseKeys {
  const prk = hkdfExtract(Buffer.concat([requestEnc, responseNonce]), exportedSecret);
  const key = hkdfExpand(prk, 'key', 32);
  const nonceBase = hkdfExpand(prk, 'nonce', 12);
  return { key: Buffer.from(key.buffer, key.byteOffset, key.byteLength), nonceBase: Buffer.from(nonceBase.buffer, nonceBase.byteOffset, nonceBase.byteLength) };
}

/** Chunk `seq`'s nonce: the nonce base XOR the sequence number, big-endian in its last bytes. */
export function chunkNonce(nonceBase: Buffer, seq: number): Buffer {
  return writeChunkNonce(Buffer.from(nonceBase), nonceBase, seq);
}

function writeChunkNonce(into: Buffer, nonceBase: Buffer, seq: number): Buffer {
  if (!Number.isSafeInteger(seq) || seq < 0 || seq >= 2 ** 32) throw new RangeError('EHBP response chunk sequence exhausted');
  into.writeUInt32BE((nonceBase.readUInt32BE(8) ^ seq) >>> 0, 8);
  return into;
}

/**
 * Seals response chunks in order, each as LEN (4 bytes, big-endian) || AES-256-GCM ciphertext and tag: one
 * cipher and one frame allocation per chunk (a string is encrypted as it is, not copied to a Buffer first).
 */
export class ResponseSealer {
  private seq = 0;
  /** Rewritten for every chunk: createCipheriv copies the IV, so one buffer serves them all. */
  private readonly nonce: Buffer;
  /** A KeyObject, made once: Node 24 charges about 10 µs for each Buffer key handed to createCipheriv. */
  private readonly key: KeyObject;

  constructor(private readonly keys: ResponseKeys) {
    this.nonce = Buffer.from(keys.nonceBase);
    this.key = createSecretKey(keys.key);
  }

  seal(plaintext: Uint8Array | string, encoding: BufferEncoding = 'utf8'): Buffer {
    const cipher = createCipheriv('aes-256-gcm', this.key, writeChunkNonce(this.nonce, this.keys.nonceBase, this.seq++));
    const body = typeof plaintext === 'string' ? cipher.update(plaintext, encoding) : cipher.update(plaintext);
    // GCM is a stream mode: final() adds no bytes, it only computes the tag.
    cipher.final();
    const frame = Buffer.allocUnsafe(4 + body.length + TAG_BYTES);
    frame.writeUInt32BE(body.length + TAG_BYTES, 0);
    body.copy(frame, 4);
    cipher.getAuthTag().copy(frame, 4 + body.length);
    return frame;
  }
}
