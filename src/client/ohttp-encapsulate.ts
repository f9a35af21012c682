/**
 * The client's side of Oblivious HTTP (RFC 9458 §4.3, §4.4 and draft-ietf-ohai-chunked-ohttp): a binary HTTP request
 * sealed to the gateway's key with `@hpke/core`'s sender, and the response opened, whole or chunk by chunk as a
 * stream arrives.
 */
import { Aes128Gcm, Aes256Gcm, CipherSuite, DhkemX25519HkdfSha256, HkdfSha256, type SenderContext } from '@hpke/core';
import {
  AEAD_AES_128_GCM,
  AEAD_AES_256_GCM,
  KDF_HKDF_SHA256,
  KEM_X25519_HKDF_SHA256,
  ObliviousHttpError,
  requestHeader,
  requestInfo,
  ResponseAead,
  responseExportLabel,
  responseNonceBytes,
  type Framing,
  type KeyConfig,
  type SymmetricAlgorithm,
} from '../protocol/ohttp.ts';
import { encodeVarint, readVarint } from '../protocol/quic-varint.ts';

/** The suites this client can send with, in the order it prefers them. */
const SUPPORTED: SymmetricAlgorithm[] = [
  { kdfId: KDF_HKDF_SHA256, aeadId: AEAD_AES_128_GCM },
  { kdfId: KDF_HKDF_SHA256, aeadId: AEAD_AES_256_GCM },
];

/** The first configuration and suite both sides support; a gateway offering none of them is refused in words. */
export function chooseSuite(configs: KeyConfig[]): { config: KeyConfig; algorithm: SymmetricAlgorithm } {
  for (const config of configs) {
    if (config.kemId !== KEM_X25519_HKDF_SHA256) continue;
    for (const wanted of SUPPORTED) {
      if (config.algorithms.some((a) => a.kdfId === wanted.kdfId && a.aeadId === wanted.aeadId)) return { config, algorithm: wanted };
    }
  }
  throw new ObliviousHttpError('the gateway offers no key configuration this client supports (X25519 with HKDF-SHA256 and AES-GCM)');
}

export interface EncapsulatedRequest {
  /** The body to POST to the relay, as `message/ohttp-req` or `message/ohttp-chunked-req`. */
  body: Uint8Array;
  /** Opens a whole response (`message/ohttp-res`). */
  openResponse(body: Uint8Array): Promise<Uint8Array>;
  /** Opens a chunked response (`message/ohttp-chunked-res`) as it arrives. */
  chunkedResponse(): Promise<ChunkedResponseOpener>;
}

/**
 * Seals `request` (a binary HTTP message) to the gateway. A chunked request is sent as its one final chunk: Sigil's
 * requests are read whole before they are relayed, and the response is what streams. `ephemeral` is for tests that
 * replay a published example; leave it out.
 */
export async function encapsulateRequest(configs: KeyConfig[], request: Uint8Array, framing: Framing, ephemeral?: CryptoKeyPair): Promise<EncapsulatedRequest> {
  const { config, algorithm } = chooseSuite(configs);
  const suite = new CipherSuite({
    kem: new DhkemX25519HkdfSha256(),
    kdf: new HkdfSha256(),
    aead: algorithm.aeadId === AEAD_AES_128_GCM ? new Aes128Gcm() : new Aes256Gcm(),
  });
  const hdr = requestHeader(config.keyId, config.kemId, algorithm);
  const sender = await suite.createSenderContext({
    recipientPublicKey: await suite.kem.deserializePublicKey(config.publicKey),
    info: requestInfo(framing, hdr),
    ...(ephemeral === undefined ? {} : { ekm: ephemeral }),
  });
  const enc = new Uint8Array(sender.enc);
  const sealed = new Uint8Array(await sender.seal(request, framing === 'chunked' ? FINAL : new Uint8Array(0)));
  const body = framing === 'whole' ? Buffer.concat([hdr, enc, sealed]) : Buffer.concat([hdr, enc, encodeVarint(0), sealed]);
  const nonceBytes = responseNonceBytes(algorithm.aeadId);
  return {
    body,
    async openResponse(response) {
      if (response.length < nonceBytes) throw new ObliviousHttpError('the encapsulated response is shorter than its nonce');
      const aead = await responseAead(sender, 'whole', algorithm.aeadId, enc, response.subarray(0, nonceBytes));
      return aead.open(response.subarray(nonceBytes), false);
    },
    async chunkedResponse() {
      return new ChunkedResponseOpener(nonceBytes, (nonce) => responseAead(sender, 'chunked', algorithm.aeadId, enc, nonce));
    },
  };
}

async function responseAead(sender: SenderContext, framing: Framing, aeadId: number, enc: Uint8Array, nonce: Uint8Array): Promise<ResponseAead> {
  const secret = new Uint8Array(await sender.export(responseExportLabel(framing), responseNonceBytes(aeadId)));
  return new ResponseAead(aeadId, secret, enc, nonce);
}

const FINAL = new TextEncoder().encode('final');

/**
 * A chunked response as its bytes arrive: the nonce, then length-prefixed chunks, each opened as soon as it is whole;
 * a zero length marks the final chunk, which runs to the end of the body. The final chunk is bounded (`maxFinal`),
 * and a body that ends without one was cut: an error, never a short answer taken as whole.
 */
export class ChunkedResponseOpener {
  #buffer: Uint8Array = new Uint8Array(0);
  #aead: ResponseAead | undefined;
  #final = false;

  constructor(
    private readonly nonceBytes: number,
    private readonly makeAead: (nonce: Uint8Array) => Promise<ResponseAead>,
    private readonly maxFinal = 1024 * 1024,
  ) {}

  async push(bytes: Uint8Array): Promise<Uint8Array[]> {
    this.#buffer = this.#buffer.length === 0 ? bytes : Buffer.concat([this.#buffer, bytes]);
    const out: Uint8Array[] = [];
    if (this.#aead === undefined) {
      if (this.#buffer.length < this.nonceBytes) return out;
      this.#aead = await this.makeAead(this.#buffer.subarray(0, this.nonceBytes));
      this.#buffer = this.#buffer.subarray(this.nonceBytes);
    }
    while (!this.#final) {
      const read = readVarint(this.#buffer, 0);
      if (read === undefined) return out;
      if (read.value === 0) {
        this.#final = true;
        this.#buffer = this.#buffer.subarray(read.next);
        break;
      }
      if (read.next + read.value > this.#buffer.length) return out;
      const opened = this.#aead.open(this.#buffer.subarray(read.next, read.next + read.value), false);
      if (opened.length === 0) throw new ObliviousHttpError('a non-final response chunk is empty, which the chunked format forbids');
      out.push(opened);
      this.#buffer = this.#buffer.subarray(read.next + read.value);
    }
    if (this.#buffer.length > this.maxFinal) throw new ObliviousHttpError(`the final response chunk is larger than ${this.maxFinal} bytes`);
    return out;
  }

  /** The body ended: opens the final chunk (AAD "final"); a body without one was truncated. */
  end(): Uint8Array {
    if (this.#aead === undefined || !this.#final) throw new ObliviousHttpError('the response was cut before its final chunk');
    return this.#aead.open(this.#buffer, true);
  }
}
