import type { CipherSuite, Key, KeyPair } from 'hpke';
import { AEAD_ID, ehbpSuite, KDF_ID, KEM_ID } from './suite.ts';

/** The enclave's HPKE key: made in this process, its private half not extractable, never logged. */
export interface EhbpServerKey {
  suite: CipherSuite;
  keyPair: KeyPair<Key>;
  /** The exact bytes served at /.well-known/hpke-keys (an RFC 9458 key_config): what the binding states. */
  keyConfig: Uint8Array;
}

/** key_id 0, kem_id, the 32-byte public key, then one (kdf_id, aead_id) suite behind its 2-byte length. */
export function encodeKeyConfig(publicKey: Uint8Array, keyId = 0): Uint8Array {
  const out = new Uint8Array(1 + 2 + publicKey.length + 2 + 4);
  const view = new DataView(out.buffer);
  out[0] = keyId;
  view.setUint16(1, KEM_ID);
  out.set(publicKey, 3);
  let at = 3 + publicKey.length;
  view.setUint16(at, 4);
  view.setUint16(at + 2, KDF_ID);
  view.setUint16(at + 4, AEAD_ID);
  at += 6;
  return out.subarray(0, at);
}

/**
 * A new key pair, or with `sealedIkm` the one RFC 9180 DeriveKeyPair makes from that sealed key material;
 * `exportable` only for a primary that hands it to its workers in memory (src/workers).
 */
export async function makeEhbpServerKey(sealedIkm?: Uint8Array, exportable = false): Promise<EhbpServerKey> {
  const suite = ehbpSuite();
  const keyPair = sealedIkm === undefined ? await suite.GenerateKeyPair(exportable) : await suite.DeriveKeyPair(sealedIkm, exportable);
  const publicKey = await suite.SerializePublicKey(keyPair.publicKey);
  return { suite, keyPair, keyConfig: encodeKeyConfig(publicKey) };
}

/** The key a primary made, rebuilt in a worker from its private half and key_config (received over IPC, never from disk). */
export async function ehbpServerKeyFrom(privateKey: Uint8Array, keyConfig: Uint8Array): Promise<EhbpServerKey> {
  const suite = ehbpSuite();
  const publicKey = await suite.DeserializePublicKey(keyConfig.subarray(3, 3 + 32));
  return { suite, keyPair: { privateKey: await suite.DeserializePrivateKey(privateKey, false), publicKey }, keyConfig };
}

/** The private half, for the primary's hand-off to its workers; the key must have been made exportable. */
export function exportEhbpPrivateKey(key: EhbpServerKey): Promise<Uint8Array> {
  return key.suite.SerializePrivateKey(key.keyPair.privateKey);
}
