import { createHmac, createPublicKey, generateKeyPairSync, sign as signBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { P256_ORDER } from '../../src/verify/es256.ts';
import { importJwks } from '../../src/verify/jwks.ts';
import { verifyCompactJws } from '../../src/verify/jws.ts';
import { b64url, makeSigner, signCompact, verifyOutcome } from './receipt-fixtures.ts';
import type { TestSigner } from './receipt-fixtures.ts';

const PAYLOAD = { receipt_id: 'rcpt_1', nonce: 'abc' };

const codeOf = verifyOutcome;

function withSignature(jws: string, signature: Uint8Array): string {
  const [h, p] = jws.split('.');
  return `${h}.${p}.${b64url(signature)}`;
}

function scalarBytes(value: bigint): Buffer {
  return Buffer.from(value.toString(16).padStart(64, '0'), 'hex');
}

describe('a compact ES256 JWS', () => {
  let signer: TestSigner;
  let other: TestSigner;
  let jwks: { keys: Array<Record<string, unknown>> };
  let good: string;

  beforeAll(async () => {
    signer = await makeSigner();
    other = await makeSigner();
    jwks = { keys: [signer.publicJwk] };
    good = signer.sign(PAYLOAD);
  });

  it('verifies when untouched, and reports the key that verified it', async () => {
    const verified = verifyCompactJws(good, (await importJwks(jwks)).keys);
    expect(verified.key.thumbprint).toBe(signer.kid);
    expect(JSON.parse(Buffer.from(verified.payload).toString())).toEqual(PAYLOAD);
    expect(verified.header).toEqual({ alg: 'ES256', typ: 'JWT', kid: signer.kid });
  });

  it('is refused after one payload byte changes', async () => {
    const [h, , s] = good.split('.');
    expect(await codeOf(`${h}.${b64url(JSON.stringify({ ...PAYLOAD, nonce: 'abd' }))}.${s}`, jwks)).toBe('ERR_RECEIPT_SIGNATURE');
  });

  it('is refused after one signature bit flips', async () => {
    const signature = Buffer.from(good.split('.')[2]!, 'base64url');
    signature[10]! ^= 0x01;
    expect(await codeOf(withSignature(good, signature), jwks)).toBe('ERR_RECEIPT_SIGNATURE');
  });

  it('is refused after the header changes (typ) under the same signature', async () => {
    const [, p, s] = good.split('.');
    const header = b64url(JSON.stringify({ alg: 'ES256', typ: 'JOSE', kid: signer.kid }));
    expect(await codeOf(`${header}.${p}.${s}`, jwks)).toBe('ERR_RECEIPT_SIGNATURE');
  });

  it('refuses alg none, with or without a signature', async () => {
    const unsigned = `${b64url(JSON.stringify({ alg: 'none' }))}.${b64url(JSON.stringify(PAYLOAD))}`;
    expect(await codeOf(`${unsigned}.`, jwks)).toBe('ERR_RECEIPT_ALG');
    expect(await codeOf(`${unsigned}.${good.split('.')[2]}`, jwks)).toBe('ERR_RECEIPT_ALG');
    expect(await codeOf(`${b64url(JSON.stringify({ alg: 'None' }))}.${b64url('{}')}.`, jwks)).toBe('ERR_RECEIPT_ALG');
  });

  it('refuses HS256 keyed with the public key (as JWK JSON, PEM and raw x||y)', async () => {
    const input = `${b64url(JSON.stringify({ alg: 'HS256', kid: signer.kid }))}.${b64url(JSON.stringify(PAYLOAD))}`;
    const pem = createPublicKey(signer.privateKey).export({ type: 'spki', format: 'pem' });
    const secrets = [
      JSON.stringify(signer.publicJwk),
      pem,
      Buffer.concat([Buffer.from(signer.publicJwk.x as string, 'base64url'), Buffer.from(signer.publicJwk.y as string, 'base64url')]),
    ];
    for (const secret of secrets) {
      const mac = createHmac('sha256', secret).update(input).digest();
      expect(await codeOf(`${input}.${b64url(mac)}`, jwks)).toBe('ERR_RECEIPT_ALG');
    }
  });

  it.each(['RS256', 'ES384', 'ES512', 'PS256', 'EdDSA', 'es256', 'ES256K'])('refuses alg %s', async (alg) => {
    expect(await codeOf(signCompact(signer.privateKey, { alg }, PAYLOAD), jwks)).toBe('ERR_RECEIPT_ALG');
  });

  it('refuses an embedded jwk header even when that key made the signature', async () => {
    const attacker = await makeSigner();
    const forged = signCompact(attacker.privateKey, { alg: 'ES256', jwk: attacker.publicJwk }, PAYLOAD);
    expect(await codeOf(forged, jwks)).toBe('ERR_RECEIPT_HEADER');
    const innocent = signCompact(signer.privateKey, { alg: 'ES256', jwk: attacker.publicJwk }, PAYLOAD);
    expect(await codeOf(innocent, jwks)).toBe('ERR_RECEIPT_HEADER');
  });

  it.each([
    ['jku', 'https://attacker.example/jwks.json'],
    ['x5u', 'https://attacker.example/cert.pem'],
    ['x5c', ['MIIB']],
    ['crit', ['exp']],
    ['b64', false],
  ])('refuses a %s header parameter without following it', async (name, value) => {
    let fetched = false;
    const realFetch = globalThis.fetch;
    globalThis.fetch = (async () => {
      fetched = true;
      throw new Error('the verifier must not fetch');
    }) as typeof fetch;
    try {
      const token = signCompact(signer.privateKey, { alg: 'ES256', kid: signer.kid, [name]: value }, PAYLOAD);
      expect(await codeOf(token, jwks)).toBe('ERR_RECEIPT_HEADER');
    } finally {
      globalThis.fetch = realFetch;
    }
    expect(fetched).toBe(false);
  });

  it('refuses a DER-encoded signature over the right bytes', async () => {
    const [h, p] = good.split('.');
    const der = signBytes('sha256', Buffer.from(`${h}.${p}`), { key: signer.privateKey, dsaEncoding: 'der' });
    expect(der[0]).toBe(0x30);
    expect(await codeOf(withSignature(good, der), jwks)).toBe('ERR_RECEIPT_SIGNATURE_ENCODING');
  });

  it('refuses an over-long signature (a zero byte appended, or r and s padded to 33 bytes)', async () => {
    const signature = Buffer.from(good.split('.')[2]!, 'base64url');
    expect(await codeOf(withSignature(good, Buffer.concat([signature, Buffer.alloc(1)])), jwks)).toBe('ERR_RECEIPT_SIGNATURE_ENCODING');
    const padded = Buffer.concat([Buffer.alloc(1), signature.subarray(0, 32), Buffer.alloc(1), signature.subarray(32)]);
    expect(await codeOf(withSignature(good, padded), jwks)).toBe('ERR_RECEIPT_SIGNATURE_ENCODING');
  });

  it('refuses a signature in padded or non-canonical base64url', async () => {
    const [h, p, s] = good.split('.');
    expect(await codeOf(`${h}.${p}.${s}==`, jwks)).toBe('ERR_RECEIPT_SIGNATURE_ENCODING');
    const last = s!.at(-1)!;
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    // 64 bytes leave 4 unused low bits in the last character; setting one keeps the bytes but changes the text.
    const twin = alphabet[alphabet.indexOf(last) ^ 1]!;
    expect(Buffer.from(`${s!.slice(0, -1)}${twin}`, 'base64url').equals(Buffer.from(s!, 'base64url'))).toBe(true);
    expect(await codeOf(`${h}.${p}.${s!.slice(0, -1)}${twin}`, jwks)).toBe('ERR_RECEIPT_SIGNATURE_ENCODING');
  });

  it.each([
    ['r = 0', 0n, null],
    ['r = n', P256_ORDER, null],
    ['s = 0', null, 0n],
    ['s = n', null, P256_ORDER],
    ['r = 2^256 - 1', 2n ** 256n - 1n, null],
  ] as const)('refuses %s', async (_label, r, s) => {
    const signature = Buffer.from(good.split('.')[2]!, 'base64url');
    const bytes = Buffer.concat([r === null ? signature.subarray(0, 32) : scalarBytes(r), s === null ? signature.subarray(32) : scalarBytes(s)]);
    expect(await codeOf(withSignature(good, bytes), jwks)).toBe('ERR_RECEIPT_SIGNATURE_ENCODING');
  });

  it('accepts s and n - s alike (signatures are malleable; nothing may key on their bytes)', async () => {
    const signature = Buffer.from(good.split('.')[2]!, 'base64url');
    const s = BigInt('0x' + signature.subarray(32).toString('hex'));
    const mirrored = Buffer.concat([signature.subarray(0, 32), scalarBytes(P256_ORDER - s)]);
    expect(await codeOf(withSignature(good, mirrored), jwks)).toBe('valid');
  });

  it('refuses keys on other curves: a real P-384 key, and a secp256k1 key', async () => {
    const p384 = await makeSigner('P-384');
    expect(await codeOf(signCompact(p384.privateKey, { alg: 'ES256' }, PAYLOAD), { keys: [p384.publicJwk] })).toBe('ERR_JWKS_NO_USABLE_KEY');
    const k1 = generateKeyPairSync('ec', { namedCurve: 'secp256k1' });
    const k1Jwk = k1.publicKey.export({ format: 'jwk' });
    const token = signCompact(k1.privateKey, { alg: 'ES256' }, PAYLOAD);
    expect(await codeOf(token, { keys: [k1Jwk] })).toBe('ERR_JWKS_NO_USABLE_KEY');
    // The same secp256k1 coordinates relabelled P-256 are not a P-256 point.
    expect(await codeOf(token, { keys: [{ ...k1Jwk, crv: 'P-256' }] })).toBe('ERR_JWKS_NO_USABLE_KEY');
    expect((await importJwks({ keys: [{ ...k1Jwk, crv: 'P-256' }] })).skipped[0]!.reason).toBe('x, y is not a point on P-256');
  });

  it('refuses a JWKS in which two keys share a kid, even if one would verify', async () => {
    expect(await codeOf(good, { keys: [signer.publicJwk, { ...other.publicJwk, kid: signer.kid }] })).toBe('ERR_JWKS_DUPLICATE_KID');
  });

  it('skips a key marked use: enc, and a key that carries d refuses the whole set', async () => {
    expect(await codeOf(good, { keys: [{ ...signer.publicJwk, use: 'enc' }] })).toBe('ERR_JWKS_NO_USABLE_KEY');
    const withD = signer.privateKey.export({ format: 'jwk' });
    expect(await codeOf(good, { keys: [withD] })).toBe('ERR_JWKS_PRIVATE_KEY');
  });

  it('tries every key: the second key verifies when the first does not, whatever kid says', async () => {
    const keys = (await importJwks({ keys: [other.publicJwk, signer.publicJwk] })).keys;
    expect(verifyCompactJws(good, keys).key.index).toBe(1);
    const misleading = signer.sign(PAYLOAD, { alg: 'ES256', typ: 'JWT', kid: other.kid });
    expect(verifyCompactJws(misleading, keys).key.index).toBe(1);
    const noKid = signer.sign(PAYLOAD, { alg: 'ES256' });
    expect(verifyCompactJws(noKid, keys).key.thumbprint).toBe(signer.kid);
  });

  it('skips an unusable key and uses the next one', async () => {
    const keys = await importJwks({ keys: [{ kty: 'RSA', n: 'AQAB', e: 'AQAB' }, { ...other.publicJwk, use: 'enc', kid: 'x' }, signer.publicJwk] });
    expect(keys.skipped.map((s) => s.index)).toEqual([0, 1]);
    expect(verifyCompactJws(good, keys.keys).key.index).toBe(2);
  });
});
