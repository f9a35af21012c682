import type { KeyObject } from 'node:crypto';
import type { CipherSuite } from '@hpke/core';
import { x25519PrivateKeyObject } from './node-crypto-hpke.ts';
import { AEAD_ID, ehbpSuite, KDF_ID, KEM_ID } from './suite.ts';

/** The enclave's HPKE key: made in this process, held only in its memory, never written or logged. */
export interface EhbpServerKey {
  suite: CipherSuite;
  keyPair: CryptoKeyPair;
  /** The private half as node:crypto's key, what every sealed request is opened with (src/ehbp/base-recipient.ts). */
  privateKey: KeyObject;
  /** The exact bytes served at /.well-known/hpke-keys (an RFC 9458 key_config): what the binding states. */
  keyConfig: Uint8Array;
  /** Only a primary's key, handed to its workers in memory, may be exported (exportEhbpPrivateKey). */
  exportable: boolean;
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
  const keyPair = sealedIkm === undefined ? await suite.kem.generateKeyPair() : await suite.kem.deriveKeyPair(sealedIkm);
  const publicKey = new Uint8Array(await suite.kem.serializePublicKey(keyPair.publicKey));
  return { suite, keyPair, privateKey: x25519PrivateKeyObject(keyPair.privateKey), keyConfig: encodeKeyConfig(publicKey), exportable };
}

/** The key a primary made, rebuilt in a worker from its private half and key_config (received over IPC, never from disk). */
export async function ehbpServerKeyFrom(privateKey: Uint8Array, keyConfig: Uint8Array): Promise<EhbpServerKey> {
  const suite = ehbpSuite();
  const keyPair = {
    privateKey: await suite.kem.deserializePrivateKey(privateKey),
    publicKey: await suite.kem.deserializePublicKey(keyConfig.subarray(3, 3 + 32)),
  };
  return { suite, keyPair, privateKey: x25519PrivateKeyObject(keyPair.privateKey), keyConfig, exportable: false };
}

/** The private half, for the primary's hand-off to its workers; the key must have been made exportable. */
export async function exportEhbpPrivateKey(key: EhbpServerKey): Promise<Uint8Array> {
  if (!key.exportable) throw new TypeError('This HPKE key was not made exportable: only a primary hands its key to workers.');
  return new Uint8Array(await key.suite.kem.serializePrivateKey(key.keyPair.privateKey));
}
