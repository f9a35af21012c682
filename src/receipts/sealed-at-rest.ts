import { createCipheriv, createDecipheriv, createHmac, createSecretKey, hkdfSync, randomBytes, type KeyObject } from 'node:crypto';

/** Who may read a stored receipt: the key hash names them in the enclave, the secret (from their API key) opens what rests outside it. */
export interface ReceiptOwner {
  keyHash: string;
  secret: Buffer;
}

const IV_BYTES = 12;
const TAG_BYTES = 16;

/** An owner's two keys at rest, HKDF-SHA256 from its secret. */
interface OwnerKeys {
  index: KeyObject;
  seal: KeyObject;
}

/**
 * Keys already derived, by the owner's secret: one owner's keys are the same for every receipt, and on Node 24 a
 * `KeyObject` costs createHmac and createCipheriv about 10 us less per call than raw key bytes (three HKDFs and
 * two raw keys were about 60 us a receipt). Keyed by the secret, not the key hash: the hash alone opens nothing.
 */
const derived = new Map<string, OwnerKeys>();
/** Only authenticated keys' secrets reach here; past this many, the map starts again. */
const MAX_DERIVED = 4096;

const subkey = (secret: Buffer, label: string) => createSecretKey(Buffer.from(hkdfSync('sha256', secret, '', `sigil receipt at rest: ${label}`, 32)));

function keysOf(owner: ReceiptOwner): OwnerKeys {
  const id = owner.secret.toString('base64');
  let keys = derived.get(id);
  if (keys === undefined) {
    if (derived.size >= MAX_DERIVED) derived.clear();
    keys = { index: subkey(owner.secret, 'index'), seal: subkey(owner.secret, 'seal') };
    derived.set(id, keys);
  }
  return keys;
}

/**
 * Where a receipt rests outside the enclave: HMAC-SHA256 of its id under a key from the owner's secret,
 * so the index reveals neither the receipt id nor who owns it, and only the owner's request finds it.
 */
export function receiptIndex(owner: ReceiptOwner, receiptId: string): string {
  return createHmac('sha256', keysOf(owner).index).update(receiptId, 'utf8').digest('hex');
}

/** AES-256-GCM under a key from the owner's secret, bound to its index: base64url of iv || ciphertext || tag. */
export function sealReceipt(owner: ReceiptOwner, index: string, jws: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', keysOf(owner).seal, iv);
  cipher.setAAD(Buffer.from(index, 'utf8'));
  const sealed = Buffer.concat([iv, cipher.update(jws, 'utf8'), cipher.final(), cipher.getAuthTag()]);
  return sealed.toString('base64url');
}

/** The JWS, or undefined when the value does not open under the owner's key at that index (not theirs, or altered). */
export function openReceipt(owner: ReceiptOwner, index: string, value: string): string | undefined {
  const sealed = Buffer.from(value, 'base64url');
  if (sealed.length < IV_BYTES + TAG_BYTES) return undefined;
  try {
    const decipher = createDecipheriv('aes-256-gcm', keysOf(owner).seal, sealed.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(index, 'utf8'));
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
    return Buffer.concat([decipher.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES)), decipher.final()]).toString('utf8');
  } catch {
    return undefined;
  }
}

/** Whether a JWS's payload names `receiptId`: what rests outside the enclave is checked before it is served. */
export function namesReceipt(jws: string, receiptId: string): boolean {
  try {
    const claims = JSON.parse(Buffer.from(jws.split('.')[1] ?? '', 'base64url').toString('utf8')) as { receipt_id?: unknown };
    return claims.receipt_id === receiptId;
  } catch {
    return false;
  }
}
