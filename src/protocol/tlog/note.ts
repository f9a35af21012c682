import { createHash, createPublicKey, verify, type KeyObject } from 'node:crypto';
import { TlogError } from './errors.ts';

/**
 * C2SP signed-note: text, a blank line, then `— <name> base64(key ID || signature)` lines. Verifier keys
 * (`<name>+<hex key ID>+base64(type || public key)`) of two types: 0x01 Ed25519 over the note text, and
 * 0x04 Ed25519 cosignature/v1 (C2SP tlog-cosignature) over a header, a timestamp line and the text.
 */

export const ED25519 = 0x01;
export const COSIGNATURE_V1 = 0x04;
type SignatureType = typeof ED25519 | typeof COSIGNATURE_V1;

export interface NoteVerifier {
  name: string;
  keyId: number;
  type: SignatureType;
  /** The 32-byte Ed25519 public key. */
  publicKey: Buffer;
  key: KeyObject;
}

export interface NoteSignature {
  name: string;
  keyId: number;
  /** The bytes after the key ID. */
  signature: Buffer;
}

export interface Note {
  /** The text, its final newline included. */
  text: string;
  signatures: NoteSignature[];
}

/** What verified: the names of the keys whose signatures checked, and for cosignatures their timestamps. */
export interface VerifiedNote {
  text: string;
  signers: Array<{ name: string; type: SignatureType; timestamp?: number }>;
}

const DASH = '\u2014 ';
const MAX_SIGNATURES = 100;

/** SHA-256(name || 0x0A || type || public key)[:4], big-endian. */
export function noteKeyId(name: string, type: number, publicKey: Uint8Array): number {
  return createHash('sha256')
    .update(name)
    .update(Buffer.from([0x0a, type]))
    .update(publicKey)
    .digest()
    .readUInt32BE(0);
}

function validName(name: string): boolean {
  return name.length > 0 && !/[\s+]/u.test(name);
}

function ed25519Key(raw: Buffer): KeyObject {
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' });
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export function decodeBase64(text: string, what: string, code: 'ERR_TLOG_VKEY' | 'ERR_TLOG_NOTE' | 'ERR_TLOG_CHECKPOINT'): Buffer {
  if (!BASE64.test(text)) throw new TlogError(code, `${what} is not standard base64`);
  return Buffer.from(text, 'base64');
}

/** Parses a verifier key of type 0x01 or 0x04, checking its key ID against the name and key. */
export function parseVerifierKey(vkey: string): NoteVerifier {
  const first = vkey.indexOf('+');
  const second = vkey.indexOf('+', first + 1);
  if (first < 0 || second < 0) throw new TlogError('ERR_TLOG_VKEY', 'a verifier key is <name>+<key ID>+<base64 key>');
  const name = vkey.slice(0, first);
  const idHex = vkey.slice(first + 1, second);
  if (!validName(name)) throw new TlogError('ERR_TLOG_VKEY', 'the key name is empty or holds a space or a plus');
  if (!/^[0-9a-f]{8}$/.test(idHex)) throw new TlogError('ERR_TLOG_VKEY', 'the key ID is not 8 lowercase hex digits');
  const material = decodeBase64(vkey.slice(second + 1), 'the key material', 'ERR_TLOG_VKEY');
  const type = material[0];
  if (type !== ED25519 && type !== COSIGNATURE_V1) throw new TlogError('ERR_TLOG_VKEY', `signature type ${type} is not Ed25519 (1) or cosignature/v1 (4)`);
  const publicKey = material.subarray(1);
  if (publicKey.length !== 32) throw new TlogError('ERR_TLOG_VKEY', 'an Ed25519 public key is 32 bytes');
  const keyId = noteKeyId(name, type, publicKey);
  if (keyId !== parseInt(idHex, 16)) throw new TlogError('ERR_TLOG_VKEY', `the key ID ${idHex} is not the one of this name and key`);
  return { name, keyId, type, publicKey: Buffer.from(publicKey), key: ed25519Key(Buffer.from(publicKey)) };
}

/** The verifier key text of a verifier. */
export function formatVerifierKey(v: Pick<NoteVerifier, 'name' | 'keyId' | 'type' | 'publicKey'>): string {
  return `${v.name}+${v.keyId.toString(16).padStart(8, '0')}+${Buffer.concat([Buffer.from([v.type]), v.publicKey]).toString('base64')}`;
}

/** Splits a signed note into its text and signature lines (C2SP signed-note, "Format"). */
export function parseNote(note: string): Note {
  if ([...note].some((c) => c < ' ' && c !== '\n')) throw new TlogError('ERR_TLOG_NOTE', 'the note holds a control character other than newline');
  if (note.includes('\uFFFD')) throw new TlogError('ERR_TLOG_NOTE', 'the note is not valid UTF-8');
  const split = note.lastIndexOf('\n\n');
  if (split < 0 || !note.endsWith('\n'))
    throw new TlogError('ERR_TLOG_NOTE', 'the note has no blank line before its signatures, or does not end with a newline');
  const text = note.slice(0, split + 1);
  const lines = note.slice(split + 2, -1).split('\n');
  if (lines.length > MAX_SIGNATURES) throw new TlogError('ERR_TLOG_NOTE', `the note carries more than ${MAX_SIGNATURES} signatures`);
  const signatures = lines.map((line) => {
    if (!line.startsWith(DASH)) throw new TlogError('ERR_TLOG_NOTE', 'a signature line does not start with an em dash and a space');
    const [name, sig, extra] = line.slice(DASH.length).split(' ');
    if (name === undefined || sig === undefined || extra !== undefined || !validName(name))
      throw new TlogError('ERR_TLOG_NOTE', 'a signature line is not "— <name> <base64>"');
    const bytes = decodeBase64(sig, 'a signature', 'ERR_TLOG_NOTE');
    if (bytes.length < 5) throw new TlogError('ERR_TLOG_NOTE', 'a signature is shorter than its key ID');
    return { name, keyId: bytes.readUInt32BE(0), signature: bytes.subarray(4) };
  });
  return { text, signatures };
}

/** The message a cosignature/v1 signs: a header line, the timestamp line, then the note text. */
export function cosignedMessage(text: string, timestamp: number): Buffer {
  return Buffer.from(`cosignature/v1\ntime ${timestamp}\n${text}`);
}

function check(v: NoteVerifier, text: string, signature: Buffer): { ok: boolean; timestamp?: number } {
  if (v.type === ED25519) return { ok: signature.length === 64 && verify(null, Buffer.from(text), v.key, signature) };
  if (signature.length !== 72) return { ok: false };
  const timestamp = signature.readBigUInt64BE(0);
  if (timestamp > BigInt(Number.MAX_SAFE_INTEGER)) return { ok: false };
  const ok = verify(null, cosignedMessage(text, Number(timestamp)), v.key, signature.subarray(8));
  return { ok, timestamp: Number(timestamp) };
}

/**
 * Verifies the signatures of known keys (same name and key ID), ignoring the others as the specification
 * requires. Throws ERR_TLOG_SIGNATURE when a known key's signature fails, or when none of them signed.
 */
export function openNote(note: string, verifiers: readonly NoteVerifier[]): VerifiedNote {
  const { text, signatures } = parseNote(note);
  const signers: VerifiedNote['signers'] = [];
  for (const s of signatures) {
    const v = verifiers.find((k) => k.name === s.name && k.keyId === s.keyId);
    if (v === undefined) continue;
    const { ok, timestamp } = check(v, text, s.signature);
    if (!ok) throw new TlogError('ERR_TLOG_SIGNATURE', `the signature of ${s.name} does not verify: the note was altered or forged`);
    if (!signers.some((x) => x.name === v.name && x.type === v.type))
      signers.push({ name: v.name, type: v.type, ...(timestamp === undefined ? {} : { timestamp }) });
  }
  if (signers.length === 0) throw new TlogError('ERR_TLOG_SIGNATURE', 'no trusted key signed the note');
  return { text, signers };
}
