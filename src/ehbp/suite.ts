import { CipherSuite } from '@hpke/core';
import { AesGcmNode, DhkemX25519HkdfSha256Node, HkdfSha256Node } from './node-crypto-hpke.ts';

/** EHBP's one suite (its specification §3.2): X25519 HKDF-SHA256, HKDF-SHA256, AES-256-GCM. */
export const KEM_ID = 0x0020;
export const KDF_ID = 0x0001;
export const AEAD_ID = 0x0002;

export const ENCAPSULATED_KEY_HEADER = 'ehbp-encapsulated-key';
export const RESPONSE_NONCE_HEADER = 'ehbp-response-nonce';
export const KEYS_PATH = '/.well-known/hpke-keys';
export const KEYS_MEDIA_TYPE = 'application/ohttp-keys';
export const KEY_CONFIG_PROBLEM_TYPE = 'urn:ietf:params:ehbp:error:key-config';

/** HPKE `info` of the request context and the exporter label of the response secret. */
export const REQUEST_INFO = new TextEncoder().encode('ehbp request');
export const RESPONSE_EXPORT_LABEL = new TextEncoder().encode('ehbp response');
export const ENC_BYTES = 32;
export const RESPONSE_NONCE_BYTES = 32;

/** `@hpke/core` (RFC 9180) on node:crypto's X25519, HKDF and AES-GCM (src/ehbp/node-crypto-hpke.ts). */
export function ehbpSuite(): CipherSuite {
  return new CipherSuite({ kem: new DhkemX25519HkdfSha256Node(), kdf: new HkdfSha256Node(), aead: new AesGcmNode(32) });
}
