import { createCipheriv, hkdfSync } from 'node:crypto';

/** The AES-256-GCM key and nonce base of one response (the EHBP specification §4.4, as OHTTP RFC 9458 derives them). */
export interface ResponseKeys {
  key: Buffer;
  nonceBase: Buffer;
}

/**
 * salt = enc || response_nonce; prk = Extract(salt, secret); key = Expand(prk, "key", 32);
 * nonce = Expand(prk, "nonce", 12). HKDF-SHA256 from node:crypto does Extract then Expand.
 */
export function deriveResponseKeys(exportedSecret: Uint8Array, requestEnc: Uint8Array, responseNonce: Uint8Array): ResponseKeys {
  const salt = Buffer.concat([requestEnc, responseNonce]);
  return {
    key: Buffer.from(hkdfSync('sha256', exportedSecret, salt, 'key', 32)),
    nonceBase: Buffer.from(hkdfSync('sha256', exportedSecret, salt, 'nonce', 12)),
  };
}

/** Chunk `seq`'s nonce: the nonce base XOR the sequence number, big-endian in its last bytes. */
export function chunkNonce(nonceBase: Buffer, seq: number): Buffer {
  if (!Number.isSafeInteger(seq) || seq < 0 || seq >= 2 ** 32) throw new RangeError('EHBP response chunk sequence exhausted');
  const nonce = Buffer.from(nonceBase);
  nonce.writeUInt32BE((nonce.readUInt32BE(8) ^ seq) >>> 0, 8);
  return nonce;
}

/** Seals response chunks in order, each as LEN (4 bytes, big-endian) || AES-256-GCM ciphertext and tag. */
export class ResponseSealer {
  private seq = 0;

  constructor(private readonly keys: ResponseKeys) {}

  seal(plaintext: Uint8Array): Buffer {
    const cipher = createCipheriv('aes-256-gcm', this.keys.key, chunkNonce(this.keys.nonceBase, this.seq++));
    const head = cipher.update(plaintext);
    const tail = cipher.final();
    const tag = cipher.getAuthTag();
    const frame = Buffer.allocUnsafe(4 + head.length + tail.length + tag.length);
    frame.writeUInt32BE(head.length + tail.length + tag.length, 0);
    head.copy(frame, 4);
    tail.copy(frame, 4 + head.length);
    tag.copy(frame, 4 + head.length + tail.length);
    return frame;
  }
}
