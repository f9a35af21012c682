import canonicalizeModule from 'canonicalize';
import { createHash } from 'node:crypto';

// The package is CommonJS with an ES-style default in its typings; the function is the module itself.
const canonicalize = canonicalizeModule as unknown as (input: unknown) => string | undefined;

/** RFC 8785 (JCS) canonical JSON text. */
export function canonicalJson(value: unknown): string {
  const text = canonicalize(value);
  if (text === undefined) throw new Error('value cannot be canonicalized');
  return text;
}

/** `"sha256:" + hex` of the RFC 8785 canonical form. */
export function jcsSha256(value: unknown): string {
  return 'sha256:' + createHash('sha256').update(canonicalJson(value), 'utf8').digest('hex');
}
