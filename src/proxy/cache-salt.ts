import { hkdfSync } from 'node:crypto';
import { editJsonObject, scanJsonObject, type ObjectScan } from '../protocol/json-edit.ts';

/** The request field vLLM reads to keep one tenant's prefix-cache entries from another's (docs/configuration.md). */
export const CACHE_SALT_FIELD = 'cache_salt';

/**
 * The caller's prefix-cache salt: 32 bytes from the secret derived from its API key, base64url. The same
 * for every request of one key (its own prefix hits survive), unrelated between keys, and neither the salt
 * nor the stored key hash gives the key.
 */
export function cacheSaltFor(callerSecret: Buffer): string {
  return Buffer.from(hkdfSync('sha256', callerSecret, '', 'sigil prefix cache salt', 32)).toString('base64url');
}

/** Salts already derived, by the SHA-256 of their key: one caller's salt is the same on every request (two HKDFs each otherwise). */
const derived = new Map<string, string>();
/** Only keys that authenticated are here; past this many (a keys file rewritten often), the map starts again. */
const MAX_DERIVED = 4096;

/** The caller's prefix-cache salt, derived on its key's first request. */
export function cacheSaltOf(caller: { keyHash: string; secret: Buffer }): string {
  let salt = derived.get(caller.keyHash);
  if (salt === undefined) {
    if (derived.size >= MAX_DERIVED) derived.clear();
    salt = cacheSaltFor(caller.secret);
    derived.set(caller.keyHash, salt);
  }
  return salt;
}

/**
 * The engine's body with `cache_salt` set to `salt`: a client's own value is replaced (a salt it could
 * choose is a salt it could share with another key), every other byte is kept. `scan` is the body's, when already made.
 */
export function withCacheSalt(body: Buffer, salt: string, scan: ObjectScan = scanJsonObject(body)): Buffer {
  const value = JSON.stringify(salt);
  if (scan.members.some((m) => m.key === CACHE_SALT_FIELD)) return editJsonObject(body, scan, { set: { [CACHE_SALT_FIELD]: value } });
  const last = scan.members.at(-1);
  const member = Buffer.from(`"${CACHE_SALT_FIELD}":${value}`, 'utf8');
  if (last === undefined) {
    const open = body.indexOf(0x7b);
    return Buffer.concat([body.subarray(0, open + 1), member, body.subarray(open + 1)]);
  }
  return Buffer.concat([body.subarray(0, last.valueEnd), Buffer.from(','), member, body.subarray(last.valueEnd)]);
}
