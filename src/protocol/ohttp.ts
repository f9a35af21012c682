/**
 * Oblivious HTTP's wire format (RFC 9458, RFC 9540 discovery, draft-ietf-ohai-chunked-ohttp), shared by the gateway
 * in the enclave and by clients: key configurations, the request header and HPKE `info`, and the response's AEAD key
 * and nonce. The HPKE contexts themselves are each side's (the gateway's node:crypto recipient, the client's
 * `@hpke/core` sender); the response's AEAD is composed here of node:crypto's HKDF and AES-GCM.
 */
import { createCipheriv, createDecipheriv, hkdfSync } from 'node:crypto';
import { SigilError } from './sigil-error.ts';

/** RFC 9540: the gateway's key configurations (GET) and the gateway itself (POST) share this path. */
export const GATEWAY_PATH = '/.well-known/ohttp-gateway';
export const KEYS_MEDIA_TYPE = 'application/ohttp-keys';
export const REQUEST_MEDIA_TYPE = 'message/ohttp-req';
export const RESPONSE_MEDIA_TYPE = 'message/ohttp-res';
export const CHUNKED_REQUEST_MEDIA_TYPE = 'message/ohttp-chunked-req';
export const CHUNKED_RESPONSE_MEDIA_TYPE = 'message/ohttp-chunked-res';
/** RFC 9458 §5.3: the problem type of a request encrypted to a key configuration the gateway does not have. */
export const KEY_CONFIG_PROBLEM_TYPE = 'https://iana.org/assignments/http-problem-types#ohttp-key';

export const KEM_X25519_HKDF_SHA256 = 0x0020;
export const KDF_HKDF_SHA256 = 0x0001;
export const AEAD_AES_128_GCM = 0x0001;
export const AEAD_AES_256_GCM = 0x0002;
export const X25519_KEY_BYTES = 32;
export const ENC_BYTES = 32;
export const REQUEST_HEADER_BYTES = 7;

/** What each AEAD needs: its node:crypto name, key length Nk and nonce length Nn. */
export const AEADS: Readonly<Record<number, { cipher: 'aes-128-gcm' | 'aes-256-gcm'; keyBytes: number; nonceBytes: number }>> = {
  [AEAD_AES_128_GCM]: { cipher: 'aes-128-gcm', keyBytes: 16, nonceBytes: 12 },
  [AEAD_AES_256_GCM]: { cipher: 'aes-256-gcm', keyBytes: 32, nonceBytes: 12 },
};
const TAG_BYTES = 16;

export interface SymmetricAlgorithm {
  kdfId: number;
  aeadId: number;
}

export interface KeyConfig {
  keyId: number;
  kemId: number;
  publicKey: Uint8Array;
  algorithms: SymmetricAlgorithm[];
}

/** Why an Oblivious HTTP message or key configuration was refused; never a byte of what it carried. */
export class ObliviousHttpError extends SigilError<'ERR_OHTTP_INVALID'> {
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_OHTTP_INVALID', message, options);
  }
}

/** One key configuration (RFC 9458 §3.1). */
export function encodeKeyConfig(config: KeyConfig): Uint8Array {
  const out = Buffer.alloc(1 + 2 + config.publicKey.length + 2 + 4 * config.algorithms.length);
  let offset = out.writeUInt8(config.keyId, 0);
  offset = out.writeUInt16BE(config.kemId, offset);
  out.set(config.publicKey, offset);
  offset = out.writeUInt16BE(4 * config.algorithms.length, offset + config.publicKey.length);
  for (const { kdfId, aeadId } of config.algorithms) offset = out.writeUInt16BE(aeadId, out.writeUInt16BE(kdfId, offset));
  return out;
}

/** `application/ohttp-keys` (RFC 9458 §3.2): each configuration prefixed with its two-byte length. */
export function encodeKeyConfigs(configs: KeyConfig[]): Uint8Array {
  return Buffer.concat(
    configs.flatMap((config) => {
      const encoded = encodeKeyConfig(config);
      const length = Buffer.alloc(2);
      length.writeUInt16BE(encoded.length);
      return [length, encoded];
    }),
  );
}

/**
 * Reads `application/ohttp-keys`. Any encoding error discards the whole list (§3.2: clients MUST, so that a
 * gateway cannot sort clients by how they recover). Only X25519 configurations are kept: the others' key lengths
 * are known, but no client here can use them.
 */
export function parseKeyConfigs(bytes: Uint8Array): KeyConfig[] {
  const data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const configs: KeyConfig[] = [];
  let offset = 0;
  if (data.length === 0) throw new ObliviousHttpError('the key configuration list is empty');
  while (offset < data.length) {
    if (offset + 2 > data.length) throw new ObliviousHttpError('the key configuration list ends inside a length');
    const length = data.readUInt16BE(offset);
    const end = offset + 2 + length;
    if (end > data.length) throw new ObliviousHttpError('a key configuration is longer than the list holds');
    configs.push(parseKeyConfig(data.subarray(offset + 2, end)));
    offset = end;
  }
  return configs.filter((config) => config.kemId === KEM_X25519_HKDF_SHA256);
}

/** One bare key configuration (§3.1), as the attestation binding states it. */
export function parseKeyConfig(bytes: Uint8Array): KeyConfig {
  const data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (data.length < 3) throw new ObliviousHttpError('a key configuration is shorter than its header');
  const keyId = data.readUInt8(0);
  const kemId = data.readUInt16BE(1);
  const keyBytes = { 0x0010: 65, 0x0011: 97, 0x0012: 133, 0x0020: 32, 0x0021: 56 }[kemId];
  if (keyBytes === undefined) throw new ObliviousHttpError(`a key configuration names KEM ${kemId}, which has no known key length`);
  if (data.length < 3 + keyBytes + 2) throw new ObliviousHttpError('a key configuration ends inside its public key');
  const publicKey = new Uint8Array(data.subarray(3, 3 + keyBytes));
  const algorithmBytes = data.readUInt16BE(3 + keyBytes);
  if (algorithmBytes < 4 || algorithmBytes % 4 !== 0 || 3 + keyBytes + 2 + algorithmBytes !== data.length) {
    throw new ObliviousHttpError('a key configuration has a malformed list of symmetric algorithms');
  }
  const algorithms: SymmetricAlgorithm[] = [];
  for (let at = 3 + keyBytes + 2; at < data.length; at += 4) algorithms.push({ kdfId: data.readUInt16BE(at), aeadId: data.readUInt16BE(at + 2) });
  return { keyId, kemId, publicKey, algorithms };
}

/** `hdr` of §4.3: key ID, KEM, KDF and AEAD, the first bytes of every encapsulated request. */
export function requestHeader(keyId: number, kemId: number, { kdfId, aeadId }: SymmetricAlgorithm): Buffer {
  const hdr = Buffer.alloc(REQUEST_HEADER_BYTES);
  hdr.writeUInt16BE(aeadId, hdr.writeUInt16BE(kdfId, hdr.writeUInt16BE(kemId, hdr.writeUInt8(keyId, 0))));
  return hdr;
}

export type Framing = 'whole' | 'chunked';

/** HPKE `info`: the label (plain or chunked), a zero byte, then the header. */
export function requestInfo(framing: Framing, hdr: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from(framing === 'whole' ? 'message/bhttp request' : 'message/bhttp chunked request', 'latin1'), Buffer.alloc(1), hdr]);
}

/** The exporter context of the response secret (§4.4 and the chunked draft §6.2). */
export function responseExportLabel(framing: Framing): Uint8Array {
  return Buffer.from(framing === 'whole' ? 'message/bhttp response' : 'message/bhttp chunked response', 'latin1');
}

/** The length of the response nonce and of the exported secret: max(Nn, Nk). */
export function responseNonceBytes(aeadId: number): number {
  const aead = aeadOf(aeadId);
  return Math.max(aead.keyBytes, aead.nonceBytes);
}

export function aeadOf(aeadId: number): (typeof AEADS)[number] {
  const aead = AEADS[aeadId];
  if (aead === undefined) throw new ObliviousHttpError(`AEAD ${aeadId} is not supported (AES-128-GCM and AES-256-GCM are)`);
  return aead;
}

/**
 * The response's AEAD (§4.4): prk = Extract(enc || response_nonce, secret), key = Expand(prk, "key", Nk),
 * nonce = Expand(prk, "nonce", Nn). Chunk `i` of a chunked response uses nonce XOR i; "final" is the last chunk's AAD.
 */
export class ResponseAead {
  readonly #cipher: 'aes-128-gcm' | 'aes-256-gcm';
  readonly #key: Buffer;
  readonly #nonce: Buffer;
  #counter = 0;

  constructor(aeadId: number, secret: Uint8Array, enc: Uint8Array, responseNonce: Uint8Array) {
    const aead = aeadOf(aeadId);
    const salt = Buffer.concat([enc, responseNonce]);
    this.#cipher = aead.cipher;
    this.#key = Buffer.from(hkdfSync('sha256', secret, salt, 'key', aead.keyBytes));
    this.#nonce = Buffer.from(hkdfSync('sha256', secret, salt, 'nonce', aead.nonceBytes));
  }

  /**
   * Seals the next chunk. A whole (non-chunked) response is one chunk with no AAD (`final` false, RFC 9458 §4.4); a
   * chunked response's last chunk carries the AAD "final", the others none.
   */
  seal(plaintext: Uint8Array, final: boolean): Buffer {
    const cipher = createCipheriv(this.#cipher, this.#key, this.#nextNonce());
    if (final) cipher.setAAD(FINAL);
    return Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
  }

  /** Throws when the tag does not verify; the counter moves on only for a chunk that opened. */
  open(sealed: Uint8Array, final: boolean): Buffer {
    if (sealed.length < TAG_BYTES) throw new ObliviousHttpError('a sealed response chunk is shorter than its tag');
    const decipher = createDecipheriv(this.#cipher, this.#key, this.#chunkNonce(this.#counter));
    if (final) decipher.setAAD(FINAL);
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
    try {
      const opened = Buffer.concat([decipher.update(sealed.subarray(0, sealed.length - TAG_BYTES)), decipher.final()]);
      this.#counter++;
      return opened;
    } catch {
      throw new ObliviousHttpError('a response chunk did not decrypt: it was altered, reordered or cut');
    }
  }

  #nextNonce(): Buffer {
    return this.#chunkNonce(this.#counter++);
  }

  #chunkNonce(counter: number): Buffer {
    const nonce = Buffer.from(this.#nonce);
    // 2^32 chunks (a 12-byte nonce allows 2^96) is far beyond any response.
    if (counter >= 2 ** 32) throw new ObliviousHttpError('a response has more chunks than its nonce allows');
    nonce.writeUInt32BE((nonce.readUInt32BE(nonce.length - 4) ^ counter) >>> 0, nonce.length - 4);
    return nonce;
  }
}

const FINAL = Buffer.from('final', 'latin1');
