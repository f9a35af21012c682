import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { ED25519, formatVerifierKey, noteKeyId } from '../protocol/tlog/note.ts';

/** The log's Ed25519 checkpoint key (C2SP signed-note type 0x01): made at a start, read from a key file, or sealed; its name is the log's origin. */
export interface LogKey {
  name: string;
  keyId: number;
  /** `<name>+<key ID>+<base64 key>`, what the attestation binding carries. */
  vkey: string;
  sign(text: string): Buffer;
}

/** An Ed25519 signer of signed notes for `name` and `type` (0x01 for the log, 0x04 for a witness's cosignatures). */
export function noteSigner(name: string, privateKey: KeyObject, publicKey: KeyObject, type: number): LogKey {
  const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url');
  const keyId = noteKeyId(name, type, raw);
  return {
    name,
    keyId,
    vkey: formatVerifierKey({ name, keyId, type: type as typeof ED25519, publicKey: raw }),
    sign: (text) => sign(null, Buffer.from(text), privateKey),
  };
}

export function generateLogKey(origin: string): LogKey {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return noteSigner(origin, privateKey, publicKey, ED25519);
}

/** The log key of an Ed25519 private key (a key file's, or one from sealed key material); its name is the log's origin. */
export function logKeyOf(origin: string, privateKey: KeyObject): LogKey {
  if (privateKey.asymmetricKeyType !== 'ed25519') throw new TypeError(`a log key is Ed25519, not ${privateKey.asymmetricKeyType ?? 'unknown'}`);
  return noteSigner(origin, privateKey, createPublicKey(privateKey), ED25519);
}

/** RFC 8410's PKCS#8 header of an Ed25519 private key: the 32-byte seed follows it. */
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

/** The Ed25519 private key whose seed is `seed` (32 bytes of sealed key material): the same key for the same seed. */
export function ed25519FromSeed(seed: Buffer): KeyObject {
  if (seed.length !== 32) throw new RangeError('an Ed25519 seed is 32 bytes');
  return createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
}

/** A signed note: the text, a blank line, and one `— name base64(key ID || signature)` line per signature given. */
export function signatureLine(name: string, keyId: number, signature: Buffer): string {
  const id = Buffer.alloc(4);
  id.writeUInt32BE(keyId);
  return `\u2014 ${name} ${Buffer.concat([id, signature]).toString('base64')}\n`;
}

/** The checkpoint text signed by the log key, as a signed note. */
export function signNote(text: string, key: LogKey): string {
  return `${text}\n${signatureLine(key.name, key.keyId, key.sign(text))}`;
}
