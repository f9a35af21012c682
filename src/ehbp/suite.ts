import { AEAD_AES_256_GCM, CipherSuite, KDF_HKDF_SHA256, KEM_DHKEM_X25519_HKDF_SHA256 } from 'hpke';

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

export function ehbpSuite(): CipherSuite {
  return new CipherSuite(KEM_DHKEM_X25519_HKDF_SHA256, KDF_HKDF_SHA256, AEAD_AES_256_GCM);
}
