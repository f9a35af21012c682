import canonicalizeModule from 'canonicalize';
import { createHash } from 'node:crypto';

// The package is CommonJS with an ES-style default in its typings; the function is the module itself.
const canonicalize = canonicalizeModule as unknown as (input: unknown) => string | undefined;

/** RFC 8785 (JCS) canonical JSON text. Throws a TypeError for values JSON cannot carry. */
export function canonicalJson(value: unknown): string {
  const text = canonicalize(value);
  if (text === undefined) throw new TypeError('value cannot be canonicalized');
  return text;
}

/** `"sha256:" + hex`, the form of every hash claim in a receipt and of `policy_hash`. */
export function sha256Tagged(bytes: Uint8Array | string): string {
  return 'sha256:' + createHash('sha256').update(bytes).digest('hex');
}

/** `"sha256:" + hex` of the RFC 8785 canonical form (docs/receipts.md, `policy_hash`). */
export function jcsSha256(value: unknown): string {
  return sha256Tagged(canonicalJson(value));
}
