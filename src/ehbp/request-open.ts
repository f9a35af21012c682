import { randomBytes } from 'node:crypto';
import { HttpError } from '../protocol/errors.ts';
import { exchangeReceiptNonce } from '../protocol/sealed-receipt.ts';
import { BaseModeSchedule, type BaseModeRecipient } from './base-recipient.ts';
import { deriveResponseKeys, ResponseSealer } from './response-seal.ts';
import type { EhbpServerKey } from './server-key.ts';
import { ENC_BYTES, KEY_CONFIG_PROBLEM_TYPE, REQUEST_INFO, RESPONSE_EXPORT_LABEL, RESPONSE_NONCE_BYTES } from './suite.ts';

/** What went wrong, for errors that must not say more (the EHBP specification §5.4.4: no fine-grained oracle). */
const INVALID_BODY = 'The encrypted request body could not be opened.';

/** The encapsulated key of `Ehbp-Encapsulated-Key`: 32 bytes of hex, once. */
export function readEncapsulatedKey(values: readonly string[] | undefined): Uint8Array {
  if (values === undefined || values.length !== 1 || !/^[0-9a-fA-F]{64}$/.test(values[0]!)) {
    throw new HttpError('ehbp_invalid_encapsulated_key', `The Ehbp-Encapsulated-Key header must be sent once, as ${ENC_BYTES * 2} hex digits.`, {
      param: 'Ehbp-Encapsulated-Key',
    });
  }
  return Buffer.from(values[0]!, 'hex');
}

/** EHBP's one suite and request `info`: the key schedule's constant part, computed once. */
const REQUEST_SCHEDULE = new BaseModeSchedule({ aead: 'aes-256-gcm' }, REQUEST_INFO);

/** Response nonces travel in the clear (`Ehbp-Response-Nonce`): cut from a 4 KiB random block, one randomBytes call per 128 requests. */
let nonceBlock = Buffer.alloc(0);
let nonceOffset = 0;
function nextResponseNonce(): Buffer {
  if (nonceOffset === nonceBlock.length) {
    nonceBlock = randomBytes(128 * RESPONSE_NONCE_BYTES);
    nonceOffset = 0;
  }
  nonceOffset += RESPONSE_NONCE_BYTES;
  return nonceBlock.subarray(nonceOffset - RESPONSE_NONCE_BYTES, nonceOffset);
}

/**
 * One encrypted exchange (the EHBP specification §4, §5.2): the request's HPKE context, and the response's nonce and
 * sealer derived from it. Errors are sealed too once a frame has opened (the client holds the context).
 */
export class EhbpExchange {
  /** Whether a request frame has opened under this context: from then on errors are sealed too. */
  authenticated = false;

  private constructor(
    private readonly context: BaseModeRecipient,
    /** Lowercase hex of a fresh 32-byte response nonce, for `Ehbp-Response-Nonce`. */
    readonly responseNonce: string,
    readonly sealer: ResponseSealer,
    /** The receipt nonce both ends derive from the context (docs/ehbp.md): nothing on the wire carries it. */
    readonly receiptNonce: string,
    /** The encapsulated key: unique per request, what the replay guard remembers. */
    readonly enc: Uint8Array,
  ) {}

  static async setup(serverKey: EhbpServerKey, enc: Uint8Array): Promise<EhbpExchange> {
    let context: BaseModeRecipient;
    let secret: Uint8Array;
    let receiptNonce: string;
    try {
      context = REQUEST_SCHEDULE.setup(serverKey.privateKey, enc);
      secret = context.export(RESPONSE_EXPORT_LABEL, 32);
      receiptNonce = await exchangeReceiptNonce({ Export: async (label, length) => context.export(label, length) });
    } catch {
      throw new HttpError('ehbp_invalid_encapsulated_key', 'The Ehbp-Encapsulated-Key header is not a valid X25519 encapsulated key.', {
        param: 'Ehbp-Encapsulated-Key',
      });
    }
    const nonce = nextResponseNonce();
    return new EhbpExchange(context, nonce.toString('hex'), new ResponseSealer(deriveResponseKeys(secret, enc, nonce)), receiptNonce, enc);
  }

  /**
   * Opens the request body (the EHBP specification §4.3): LEN (4 bytes, big-endian) || ciphertext, repeated, each opened
   * in order; empty frames are skipped. A first frame that does not open is a key-configuration mismatch
   * (422: the client may hold a stale key); any later failure, or framing cut short, is a 400 that says no
   * more. The plaintext may not exceed `maxPlaintext` (413).
   */
  async open(body: Buffer, maxPlaintext: number): Promise<Buffer> {
    const parts: Buffer[] = [];
    let size = 0;
    for (let at = 0; at < body.length;) {
      if (body.length - at < 4) throw new HttpError('ehbp_invalid_body', INVALID_BODY);
      const length = body.readUInt32BE(at);
      at += 4;
      if (length > body.length - at) throw new HttpError('ehbp_invalid_body', INVALID_BODY);
      if (length === 0) continue;
      let plaintext: Buffer;
      try {
        plaintext = this.context.open(body.subarray(at, at + length));
      } catch {
        if (!this.authenticated) {
          throw new HttpError('ehbp_key_config_mismatch', "The request was not encrypted to this server's current key: fetch /.well-known/hpke-keys again.", {
            problemType: KEY_CONFIG_PROBLEM_TYPE,
          });
        }
        throw new HttpError('ehbp_invalid_body', INVALID_BODY);
      }
      this.authenticated = true;
      at += length;
      size += plaintext.byteLength;
      if (size > maxPlaintext) throw new HttpError('request_too_large', `The request body is larger than ${maxPlaintext} bytes.`);
      parts.push(plaintext);
    }
    if (!this.authenticated) throw new HttpError('ehbp_invalid_body', 'An encrypted request must carry a body.');
    return Buffer.concat(parts, size);
  }
}
