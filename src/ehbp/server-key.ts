import type { KeyObject } from 'node:crypto';
import type { CipherSuite } from '@hpke/core';
import { x25519PrivateKeyObject } from './node-crypto-hpke.ts';
import { AEAD_ID, ehbpSuite, KDF_ID, KEM_ID } from './suite.ts';
import { encodeKeyConfig } from '../protocol/ohttp.ts';

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

/** key_id 0, kem_id, the 32-byte public key, then EHBP's one (kdf_id, aead_id) suite: RFC 9458's key configuration, written by its one writer. */
export function ehbpKeyConfig(publicKey: Uint8Array, keyId = 0): Uint8Array {
  return encodeKeyConfig({ keyId, kemId: KEM_ID, publicKey, algorithms: [{ kdfId: KDF_ID, aeadId: AEAD_ID }] });
}

/**
 * A new key pair, or with `sealedIkm` the one RFC 9180 DeriveKeyPair makes from that sealed key material;
 * `exportable` only for a primary that hands it to its workers in memory (src/workers).
 */
export async function makeEhbpServerKey(sealedIkm?: Uint8Array, exportable = false): Promise<EhbpServerKey> {
  const suite = ehbpSuite();
  const keyPair = sealedIkm === undefined ? await suite.kem.generateKeyPair() : await suite.kem.deriveKeyPair(sealedIkm);
  const publicKey = new Uint8Array(await suite.kem.serializePublicKey(keyPair.publicKey));
  return { suite, keyPair, privateKey: x25519PrivateKeyObject(keyPair.privateKey), keyConfig: ehbpKeyConfig(publicKey), exportable };
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
