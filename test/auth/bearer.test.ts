import { hkdfSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { KeyRing } from '../../src/auth/bearer.ts';
import { hashApiKey } from '../../src/auth/keys-file.ts';

/** src/auth/bearer.ts: who a request comes from, by the SHA-256 of its key. */
const KEY = 'sk-sigil-test-0123456789abcdef';
const ring = new KeyRing([{ hash: hashApiKey(KEY), created: '', label: '' }]);

describe('KeyRing.authenticate', () => {
  it("names the caller by its key's hash and gives the secret HKDF derives from the presented key, the same on every read", () => {
    const caller = ring.authenticate({ authorization: `Bearer ${KEY}` });
    expect(caller.keyHash).toBe(hashApiKey(KEY));
    expect(caller.keyId).toBe(hashApiKey(KEY).slice(0, 12));
    const expected = Buffer.from(hkdfSync('sha256', KEY, 'sigil caller secret', '', 32));
    expect(caller.secret.equals(expected)).toBe(true);
    expect(caller.secret).toBe(caller.secret);
    expect(ring.authenticate({ authorization: `bearer \t${KEY} ` }).secret.equals(expected)).toBe(true);
  });

  it('refuses a missing, malformed or unknown key with the OpenAI codes', () => {
    expect(() => ring.authenticate({})).toThrow(expect.objectContaining({ code: 'missing_api_key' }));
    expect(() => ring.authenticate({ authorization: `Basic ${KEY}` })).toThrow(expect.objectContaining({ code: 'invalid_api_key' }));
    expect(() => ring.authenticate({ authorization: 'Bearer sk-sigil-other' })).toThrow(expect.objectContaining({ code: 'invalid_api_key' }));
  });
});
