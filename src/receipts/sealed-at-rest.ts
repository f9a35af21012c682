import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';

/** Who may read a stored receipt: the key hash names them in the enclave, the secret (from their API key) opens what rests outside it. */
export interface ReceiptOwner {
  keyHash: string;
  secret: Buffer;
}

const IV_BYTES = 12;
const TAG_BYTES = 16;
const subkey = (owner: ReceiptOwner, label: string) => Buffer.from(hkdfSync('sha256', owner.secret, '', `sigil receipt at rest: ${label}`, 32));

/**
 * Where a receipt rests outside the enclave: HMAC-SHA256 of its id under a key from the owner's secret,
 * so the index reveals neither the receipt id nor who owns it, and only the owner's request finds it.
 */
export function receiptIndex(owner: ReceiptOwner, receiptId: string): string {
  return createHmac('sha256', subkey(owner, 'index')).update(receiptId, 'utf8').digest('hex');
}

/** AES-256-GCM under a key from the owner's secret, bound to its index: base64url of iv || ciphertext || tag. */
export function sealReceipt(owner: ReceiptOwner, index: string, jws: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', subkey(owner, 'seal'), iv);
  cipher.setAAD(Buffer.from(index, 'utf8'));
  const sealed = Buffer.concat([iv, cipher.update(jws, 'utf8'), cipher.final(), cipher.getAuthTag()]);
  return sealed.toString('base64url');
}

/** The JWS, or undefined when the value does not open under the owner's key at that index (not theirs, or altered). */
export function openReceipt(owner: ReceiptOwner, index: string, value: string): string | undefined {
  const sealed = Buffer.from(value, 'base64url');
  if (sealed.length < IV_BYTES + TAG_BYTES) return undefined;
  try {
    const decipher = createDecipheriv('aes-256-gcm', subkey(owner, 'seal'), sealed.subarray(0, IV_BYTES));
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
