import { createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { hkdfExpand, hkdfExtract, hmacSha256 } from '../../src/ehbp/node-crypto-hpke.ts';

/** Wycheproof (test/vectors/README.md): HMAC-SHA256 with keys around the block size and truncated tags; HKDF-SHA256. */
interface Suite<T> {
  testGroups: Array<{ tagSize?: number; tests: T[] }>;
}
interface MacCase {
  tcId: number;
  key: string;
  msg: string;
  tag: string;
  result: 'valid' | 'invalid';
}
interface HkdfCase {
  tcId: number;
  ikm: string;
  salt: string;
  info: string;
  size: number;
  okm: string;
  result: 'valid' | 'invalid';
}

const vectors = <T>(name: string) => JSON.parse(readFileSync(join(import.meta.dirname, '../vectors/wycheproof', name), 'utf8')) as Suite<T>;
const hex = (s: string) => Buffer.from(s, 'hex');

describe("EHBP's HMAC-SHA256 and HKDF-SHA256, of one-shot SHA-256 calls", () => {
  it('gives every Wycheproof HMAC-SHA256 tag: valid cases match, invalid (altered) ones do not', () => {
    let valid = 0;
    for (const group of vectors<MacCase>('hmac_sha256_test.json').testGroups) {
      for (const t of group.tests) {
        const tag = hmacSha256(hex(t.key), hex(t.msg)).subarray(0, group.tagSize! / 8);
        expect({ tcId: t.tcId, matches: tag.equals(hex(t.tag)) }).toEqual({ tcId: t.tcId, matches: t.result === 'valid' });
        if (t.result === 'valid') valid++;
      }
    }
    expect(valid).toBe(66);
  });

  it("gives every valid Wycheproof HKDF-SHA256 output (RFC 5869's cases among them), and refuses a length over 255 blocks", () => {
    let checked = 0;
    for (const t of vectors<HkdfCase>('hkdf_sha256_test.json').testGroups.flatMap((g) => g.tests)) {
      if (t.result === 'invalid') {
        expect(() => hkdfExpand(hkdfExtract(hex(t.salt), hex(t.ikm)), hex(t.info), t.size)).toThrow(RangeError);
        continue;
      }
      expect({ tcId: t.tcId, okm: Buffer.from(hkdfExpand(hkdfExtract(hex(t.salt), hex(t.ikm)), hex(t.info), t.size)).toString('hex') }).toEqual({
        tcId: t.tcId,
        okm: t.okm,
      });
      checked++;
    }
    expect(checked).toBeGreaterThan(80);
  });

  it('agrees with OpenSSL (createHmac, hkdfSync) on random keys and messages of every length around the block', () => {
    for (let keyLength = 0; keyLength <= 130; keyLength += 1) {
      const key = randomBytes(keyLength);
      const message = randomBytes((keyLength * 7) % 200);
      expect(hmacSha256(key, message).toString('hex')).toBe(createHmac('sha256', key).update(message).digest('hex'));
      const okm = Buffer.from(hkdfExpand(hkdfExtract(key, message), 'ehbp', 1 + ((keyLength * 13) % 100)));
      expect(okm.toString('hex')).toBe(Buffer.from(hkdfSync('sha256', message, key, 'ehbp', okm.length)).toString('hex'));
    }
  });
});
