// The browser bundle's Buffer (injected, and what `node:buffer` resolves to): the `buffer` package, plus the
// 'base64url' encoding Node has and that package lacks, which the verifier uses for JWS and JWK values.
import { Buffer } from 'buffer';

const from = Buffer.from.bind(Buffer) as (value: unknown, encoding?: unknown, length?: unknown) => Buffer;
const toString = Buffer.prototype.toString;

Buffer.from = function fromWithBase64url(value: unknown, encoding?: unknown, length?: unknown): Buffer {
  if (typeof value === 'string' && encoding === 'base64url') return from(value.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  return from(value, encoding, length);
} as typeof Buffer.from;

Buffer.prototype.toString = function toStringWithBase64url(this: Buffer, encoding?: string, start?: number, end?: number): string {
  if (encoding === 'base64url') return toString.call(this, 'base64', start, end).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  return toString.call(this, encoding as 'utf8', start, end);
};

export { Buffer };
export default { Buffer };
