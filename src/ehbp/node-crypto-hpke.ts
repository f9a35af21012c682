/**
 * HPKE's three primitives on node:crypto (OpenSSL), plugged into `@hpke/core` through the extension points it
 * exposes: an X25519 curve for its `XCurveDhkemPrimitives`, an HKDF-SHA256 whose Extract and Expand replace
 * WebCrypto's, and an AES-GCM AEAD. The DHKEM, its labelled derivations, DeriveKeyPair and the key schedule
 * stay the library's. Each step runs synchronously in OpenSSL: WebCrypto in Node goes through a promise and
 * the thread pool for every one of the dozen small steps of a request's set-up (docs/decisions.md).
 */
import {
  createCipheriv,
  createDecipheriv,
  createPrivateKey,
  createPublicKey,
  createSecretKey,
  decapsulate,
  diffieHellman,
  hash,
  randomBytes,
  type KeyObject,
} from 'node:crypto';
import {
  AeadId,
  DecapError,
  Dhkem,
  isCryptoKeyPair,
  XCryptoKey,
  HkdfSha256Native,
  KemId,
  XCurveDhkemPrimitives,
  type AeadEncryptionContext,
  type AeadInterface,
  type MontgomeryECDH,
  type RecipientContextParams,
} from '@hpke/common';

type Bytes = ArrayBufferLike | ArrayBufferView;

const bytes = (input: Bytes): Uint8Array =>
  ArrayBuffer.isView(input) ? new Uint8Array(input.buffer, input.byteOffset, input.byteLength) : new Uint8Array(input);

/** The library reads `.buffer` of what it gets back, so every result owns exactly its ArrayBuffer. */
function owned(b: Uint8Array): Uint8Array {
  if (b.byteOffset === 0 && b.buffer.byteLength === b.byteLength && b.buffer instanceof ArrayBuffer) return b;
  return new Uint8Array(b);
}

const X25519_PKCS8 = Buffer.from('302e020100300506032b656e04220420', 'hex');
const X25519_BASE_POINT = Uint8Array.from({ length: 32 }, (_, i) => (i === 0 ? 9 : 0));

/** A private scalar is imported once (OpenSSL's PKCS#8 decoder is slow); the server's key is used for every request. */
const privateKeys = new WeakMap<Uint8Array, KeyObject>();

function privateKeyOf(secretKey: Uint8Array): KeyObject {
  let key = privateKeys.get(secretKey);
  if (key === undefined) {
    key = createPrivateKey({ key: Buffer.concat([X25519_PKCS8, secretKey]), format: 'der', type: 'pkcs8' });
    privateKeys.set(secretKey, key);
  }
  return key;
}

/** The X25519 private key of a key pair `@hpke/core` made with the primitives below, as node:crypto's KeyObject. */
export function x25519PrivateKeyObject(privateKey: CryptoKey): KeyObject {
  if (!(privateKey instanceof XCryptoKey) || privateKey.type !== 'private') throw new TypeError('not an X25519 private key made by this HPKE suite');
  return privateKeyOf(privateKey.key);
}

// A JWK import goes straight to EVP_PKEY_new_raw_public_key; a DER one through OpenSSL's decoder, ten times slower.
const publicKeyOf = (publicKey: Uint8Array): KeyObject =>
  createPublicKey({
    key: { kty: 'OKP', crv: 'X25519', x: Buffer.from(publicKey.buffer, publicKey.byteOffset, publicKey.byteLength).toString('base64url') },
    format: 'jwk',
  });

/** OpenSSL refuses an all-zero shared secret (a low-order point), as RFC 9180 §7.1.4 requires. */
function sharedSecret(secretKey: Uint8Array, publicKey: Uint8Array): Uint8Array {
  return owned(diffieHellman({ privateKey: privateKeyOf(secretKey), publicKey: publicKeyOf(publicKey) }));
}

function publicKeyFor(secretKey: Uint8Array): Uint8Array {
  const { x } = createPublicKey(privateKeyOf(secretKey)).export({ format: 'jwk' });
  return owned(Buffer.from(x!, 'base64url'));
}

function keygen(seed?: Uint8Array): { secretKey: Uint8Array; publicKey: Uint8Array } {
  const secretKey = seed === undefined ? new Uint8Array(randomBytes(32)) : owned(seed);
  return { secretKey, publicKey: publicKeyFor(secretKey) };
}

/** X25519 (RFC 7748) in the shape `XCurveDhkemPrimitives` takes, computed by OpenSSL. */
export const x25519: MontgomeryECDH = {
  scalarMult: sharedSecret,
  scalarMultBase: publicKeyFor,
  getSharedSecret: sharedSecret,
  getPublicKey: publicKeyFor,
  utils: { randomSecretKey: async (seed?: Uint8Array) => keygen(seed).secretKey },
  GuBytes: X25519_BASE_POINT,
  lengths: { secretKey: 32, publicKey: 32, seed: 32 },
  keygen,
};

const SHA256_BYTES = 32;
const SHA256_BLOCK = 64;

/**
 * HMAC-SHA256 (RFC 2104, FIPS 198-1) of two one-shot SHA-256 calls: H((K0 ^ opad) || H((K0 ^ ipad) || message)).
 * node:crypto's `createHmac` allocates a native Hmac and, on Node 24, a KeyObject per call, whose garbage costs
 * the server more than the hashing (bench/README.md, "EHBP on Node 24"); `crypto.hash` allocates neither. Tested
 * against Wycheproof's HMAC-SHA256 and HKDF-SHA256 vectors (test/ehbp/hmac.test.ts).
 */
export function hmacSha256(key: Uint8Array, message: Uint8Array): Buffer {
  const k0 = key.byteLength > SHA256_BLOCK ? hash('sha256', key, 'buffer') : key;
  const inner = Buffer.allocUnsafe(SHA256_BLOCK + message.byteLength);
  const outer = Buffer.allocUnsafe(SHA256_BLOCK + SHA256_BYTES);
  for (let i = 0; i < SHA256_BLOCK; i++) {
    const byte = i < k0.byteLength ? k0[i]! : 0;
    inner[i] = byte ^ 0x36;
    outer[i] = byte ^ 0x5c;
  }
  inner.set(message, SHA256_BLOCK);
  outer.set(hash('sha256', inner, 'buffer'), SHA256_BLOCK);
  return hash('sha256', outer, 'buffer');
}

/** HKDF-SHA256 Extract (RFC 5869 §2.2): HMAC(salt, IKM); an empty salt is HashLen zeros, which HMAC pads the same way. */
export function hkdfExtract(salt: Uint8Array, ikm: Uint8Array): Uint8Array {
  return owned(hmacSha256(salt, ikm));
}

/** HKDF-SHA256 Expand (RFC 5869 §2.3): T(i) = HMAC(PRK, T(i-1) || info || i), cut to `length` bytes. */
export function hkdfExpand(prk: Uint8Array, info: Uint8Array | string, length: number): Uint8Array {
  if (length > 255 * SHA256_BYTES) throw new RangeError('HKDF-Expand: at most 255 blocks');
  const infoBytes = typeof info === 'string' ? Buffer.from(info, 'utf8') : info;
  const okm = new Uint8Array(length);
  // T(i-1) || info || i, with room for T(i-1) after the first block.
  const input = Buffer.allocUnsafe(SHA256_BYTES + infoBytes.byteLength + 1);
  let block: Buffer | undefined;
  for (let i = 1, at = 0; at < length; i++, at += SHA256_BYTES) {
    const from = block === undefined ? SHA256_BYTES : 0;
    if (block !== undefined) input.set(block, 0);
    input.set(infoBytes, SHA256_BYTES);
    input[input.length - 1] = i;
    block = hmacSha256(prk, input.subarray(from));
    okm.set(block.subarray(0, Math.min(SHA256_BYTES, length - at)), at);
  }
  return okm;
}

/** HKDF-SHA256 for `@hpke/core`: the library builds the labelled inputs, the functions above compute. */
export class HkdfSha256Node extends HkdfSha256Native {
  override async extract(salt: Bytes, ikm: Bytes): Promise<ArrayBuffer> {
    return hkdfExtract(bytes(salt), bytes(ikm)).buffer as ArrayBuffer;
  }

  override async expand(prk: Bytes, info: Bytes, len: number): Promise<ArrayBuffer> {
    return hkdfExpand(bytes(prk), bytes(info), len).buffer as ArrayBuffer;
  }

  override async extractAndExpand(salt: Bytes, ikm: Bytes, info: Bytes, len: number): Promise<ArrayBuffer> {
    return hkdfExpand(hkdfExtract(bytes(salt), bytes(ikm)), bytes(info), len).buffer as ArrayBuffer;
  }
}

/** DHKEM(X25519, HKDF-SHA256) of RFC 9180 §4.1, as `@hpke/core`'s own, on the node:crypto primitives above. */
export class DhkemX25519HkdfSha256Node extends Dhkem {
  override readonly secretSize = 32;
  override readonly encSize = 32;
  override readonly publicKeySize = 32;
  override readonly privateKeySize = 32;

  constructor() {
    const kdf = new HkdfSha256Node();
    super(KemId.DhkemX25519HkdfSha256, new XCurveDhkemPrimitives('X25519', 32, x25519, kdf), kdf);
  }

  /**
   * Decap (RFC 9180 §4.1) in one OpenSSL call: OpenSSL 3.2+ implements DHKEM(X25519, HKDF-SHA256) itself
   * (EVP_PKEY_decapsulate, node:crypto `decapsulate`). The authenticated modes (two DHs) stay the library's.
   */
  override async decap(params: RecipientContextParams): Promise<ArrayBuffer> {
    const secretKey = isCryptoKeyPair(params.recipientKey) ? params.recipientKey.privateKey : params.recipientKey;
    if (params.senderPublicKey !== undefined || !(secretKey instanceof XCryptoKey)) return super.decap(params);
    try {
      return owned(decapsulate(privateKeyOf(secretKey.key), bytes(params.enc))).buffer as ArrayBuffer;
    } catch (err) {
      throw new DecapError(err);
    }
  }
}

const TAG_BYTES = 16;

/** AES-GCM with a 16-byte tag appended to the ciphertext, one node:crypto cipher per message. */
class AesGcmNodeContext implements AeadEncryptionContext {
  private readonly key: KeyObject;

  constructor(
    private readonly algorithm: 'aes-128-gcm' | 'aes-256-gcm',
    key: Uint8Array,
  ) {
    this.key = createSecretKey(key);
  }

  async seal(iv: Bytes, data: Bytes, aad: Bytes): Promise<ArrayBuffer> {
    const plaintext = bytes(data);
    const cipher = createCipheriv(this.algorithm, this.key, bytes(iv), { authTagLength: TAG_BYTES });
    cipher.setAAD(bytes(aad));
    const out = new Uint8Array(plaintext.byteLength + TAG_BYTES);
    out.set(cipher.update(plaintext), 0);
    cipher.final();
    out.set(cipher.getAuthTag(), plaintext.byteLength);
    return out.buffer;
  }

  async open(iv: Bytes, data: Bytes, aad: Bytes): Promise<ArrayBuffer> {
    return owned(openAesGcm(this.algorithm, this.key, bytes(iv), bytes(data), bytes(aad))).buffer as ArrayBuffer;
  }
}

/** AES-GCM decryption of ciphertext || 16-byte tag; throws when the tag does not verify. */
export function openAesGcm(algorithm: 'aes-128-gcm' | 'aes-256-gcm', key: KeyObject, iv: Uint8Array, sealed: Uint8Array, aad: Uint8Array): Buffer {
  if (sealed.byteLength < TAG_BYTES) throw new RangeError('AES-GCM: ciphertext shorter than its tag');
  const body = sealed.byteLength - TAG_BYTES;
  const decipher = createDecipheriv(algorithm, key, iv, { authTagLength: TAG_BYTES });
  decipher.setAAD(aad);
  decipher.setAuthTag(sealed.subarray(body));
  const head = decipher.update(sealed.subarray(0, body));
  // GCM is a stream mode: final() adds no bytes, it only checks the tag.
  decipher.final();
  return head;
}

/** AES-128-GCM (AEAD id 1) or AES-256-GCM (id 2, EHBP's). */
export class AesGcmNode implements AeadInterface {
  readonly id: AeadId;
  readonly nonceSize = 12;
  readonly tagSize = TAG_BYTES;

  constructor(readonly keySize: 16 | 32) {
    this.id = keySize === 16 ? AeadId.Aes128Gcm : AeadId.Aes256Gcm;
  }

  createEncryptionContext(key: Bytes): AeadEncryptionContext {
    return new AesGcmNodeContext(this.keySize === 16 ? 'aes-128-gcm' : 'aes-256-gcm', bytes(key));
  }
}
