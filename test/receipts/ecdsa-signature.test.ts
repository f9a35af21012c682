import { generateKeyPairSync, sign, verify } from 'node:crypto';
import { compactVerify, exportJWK } from 'jose';
import { describe, expect, it } from 'vitest';
import { p1363FromDer } from '../../src/receipts/ecdsa-signature.ts';

/** src/receipts/ecdsa-signature.ts: an ECDSA P-256 signature from OpenSSL's DER into JWS's fixed 64 bytes (RFC 7518 §3.4). */
describe('a P-256 signature in IEEE P1363 form', () => {
  it('verifies as P1363 for every one of 3,000 signatures, the short r and s (leading zero bytes) among them', () => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    let short = 0;
    for (let i = 0; i < 3000; i++) {
      const data = Buffer.from(`message ${i}`);
      const der = sign('sha256', data, privateKey);
      // DER drops leading zero bytes of r or s: about 1 signature in 128 has a 31-byte (or shorter) integer.
      if (der[3]! < 32 || der[5 + der[3]!]! < 32) short++;
      const p1363 = p1363FromDer(der);
      expect(p1363).toHaveLength(64);
      expect(verify('sha256', data, { key: publicKey, dsaEncoding: 'ieee-p1363' }, p1363)).toBe(true);
    }
    expect(short).toBeGreaterThan(0);
  });

  it("matches node:crypto's own P1363 encoding byte for byte, for integers of 33, 32, 31 and 1 bytes", () => {
    const r32 = Buffer.alloc(32, 0x11);
    const rHigh = Buffer.concat([Buffer.from([0x00]), Buffer.alloc(32, 0xf0)]); // a high bit set: DER adds a zero byte
    const s31 = Buffer.alloc(31, 0x22);
    const s1 = Buffer.from([0x05]);
    const der = (r: Buffer, s: Buffer) => Buffer.concat([Buffer.from([0x30, 4 + r.length + s.length, 0x02, r.length]), r, Buffer.from([0x02, s.length]), s]);
    expect(p1363FromDer(der(r32, s31)).toString('hex')).toBe('11'.repeat(32) + '00' + '22'.repeat(31));
    expect(p1363FromDer(der(rHigh, s1)).toString('hex')).toBe('f0'.repeat(32) + '00'.repeat(31) + '05');
  });

  it('refuses what is not a DER ECDSA signature of a P-256 size', () => {
    for (const bad of [
      '',
      '3000',
      '3006020100020100ff',
      '300702010102020001',
      '30440220' + '11'.repeat(34),
      '3046022100' + '11'.repeat(33) + '020101',
      '30260221' + '11'.repeat(33) + '020101',
    ]) {
      expect(() => p1363FromDer(Buffer.from(bad, 'hex')), bad).toThrow(/not a DER ECDSA P-256 signature/);
    }
  });

  it('gives a JWS that jose verifies', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const input = `${Buffer.from('{"alg":"ES256"}').toString('base64url')}.${Buffer.from('{"a":1}').toString('base64url')}`;
    const jws = `${input}.${p1363FromDer(sign('sha256', Buffer.from(input), privateKey)).toString('base64url')}`;
    const verified = await compactVerify(jws, publicKey, { algorithms: ['ES256'] });
    expect(new TextDecoder().decode(verified.payload)).toBe('{"a":1}');
    expect((await exportJWK(publicKey)).crv).toBe('P-256');
  });
});
