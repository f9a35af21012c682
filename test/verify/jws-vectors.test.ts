import { createPublicKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { verifyEs256 } from '../../src/verify/es256.ts';
import { isVerifyError } from '../../src/verify/errors.ts';
import { importJwks } from '../../src/verify/jwks.ts';
import { verifyCompactJws } from '../../src/verify/jws.ts';
import { verifyOutcome } from './receipt-fixtures.ts';

const VECTORS = new URL('../vectors/', import.meta.url);
const load = <T>(path: string): T => JSON.parse(readFileSync(new URL(path, VECTORS), 'utf8')) as T;

interface Case {
  tcId: number;
  comment: string;
  result: 'valid' | 'invalid' | 'acceptable';
}
interface EcdsaFile {
  numberOfTests: number;
  testGroups: Array<{ publicKeyJwk?: Record<string, unknown>; publicKeyDer: string; tests: Array<Case & { msg: string; sig: string }> }>;
}
interface JwsFile {
  testGroups: Array<{ comment: string; public?: unknown; private?: unknown; tests: Array<Case & { jws: string }> }>;
}

const outcome = verifyOutcome;

function headerAlg(jws: string): unknown {
  try {
    return (JSON.parse(Buffer.from(jws.split('.')[0] ?? '', 'base64url').toString()) as { alg?: unknown }).alg;
  } catch {
    return undefined;
  }
}

describe('RFC 7515 Appendix A.3 (ES256)', () => {
  const a3 = load<{ jwk: Record<string, unknown>; jws: string; low_s_signature: string; payload: string }>('rfc7515/a3-es256.json');

  it('verifies the published high-S signature, payload unchanged, although its exp lies in 2011', async () => {
    const { keys } = await importJwks({ keys: [a3.jwk] });
    const verified = verifyCompactJws(a3.jws, keys);
    expect(Buffer.from(verified.payload).toString('utf8')).toBe(a3.payload);
    expect(verified.header).toEqual({ alg: 'ES256' });
  });

  it('verifies the mirrored low-S signature of the same token', async () => {
    const { keys } = await importJwks({ keys: [a3.jwk] });
    const [h, p] = a3.jws.split('.');
    expect(a3.low_s_signature).not.toBe(a3.jws.split('.')[2]);
    expect(verifyCompactJws(`${h}.${p}.${a3.low_s_signature}`, keys).key.index).toBe(0);
  });
});

describe('Wycheproof ecdsa_secp256r1_sha256_p1363_test.json through verifyEs256', () => {
  const file = load<EcdsaFile>('wycheproof/ecdsa_secp256r1_sha256_p1363_test.json');
  const cases = file.testGroups.flatMap((group) => group.tests.map((test) => ({ group, test })));

  it('covers all 262 cases, none "acceptable"', () => {
    expect(cases.length).toBe(262);
    expect(file.numberOfTests).toBe(262);
    expect(cases.filter((c) => c.test.result === 'acceptable')).toEqual([]);
  });

  it.each(cases.map((c) => [c.test.tcId, c.test.comment, c.test.result, c] as const))('case %i (%s) is %s', async (_id, _comment, result, { group, test }) => {
    // Cases 253-262 ship only the DER public key; it goes through the same JWKS import as the rest.
    const jwk = group.publicKeyJwk ?? createPublicKey({ key: Buffer.from(group.publicKeyDer, 'hex'), format: 'der', type: 'spki' }).export({ format: 'jwk' });
    const { keys } = await importJwks({ keys: [{ ...jwk, kid: undefined }] });
    expect(keys.length).toBe(1);
    let accepted: boolean;
    try {
      accepted = verifyEs256(keys[0]!.key, Buffer.from(test.msg, 'hex'), Buffer.from(test.sig, 'hex'));
    } catch (err) {
      expect(isVerifyError(err) && err.code).toBe('ERR_RECEIPT_SIGNATURE_ENCODING');
      accepted = false;
    }
    expect(accepted).toBe(result === 'valid');
  });
});

describe('Wycheproof json_web_signature_test.json', () => {
  const file = load<JwsFile>('wycheproof/json_web_signature_test.json');
  const es256 = file.testGroups.filter((g) => g.comment === 'es256' || g.comment === 'SpecialCaseEs256');

  it('has the 15 es256 and 24 SpecialCaseEs256 cases', () => {
    expect(es256.map((g) => [g.comment, g.tests.length])).toEqual([
      ['es256', 15],
      ['SpecialCaseEs256', 24],
    ]);
  });

  const es256Cases = es256.flatMap((g) => g.tests.map((t) => [g.comment, t.tcId, t.comment, t.result, g.public, t.jws] as const));
  it.each(es256Cases)('%s case %i (%s) is %s', async (_g, _id, _comment, result, key, jws) => {
    const got = await outcome(jws, key);
    if (result === 'valid') expect(got).toBe('valid');
    else expect(got).not.toBe('valid');
  });

  it('refuses each ES256 special case for the reason expected', async () => {
    const byId = new Map(es256.flatMap((g) => g.tests.map((t) => [t.tcId, { jws: t.jws, key: g.public }] as const)));
    const codeOf = async (id: number) => outcome(byId.get(id)!.jws, byId.get(id)!.key);
    expect(await codeOf(19)).toBe('ERR_RECEIPT_SIGNATURE'); // modified signature
    expect(await codeOf(20)).toBe('ERR_RECEIPT_SIGNATURE_ENCODING'); // missing signature
    expect(await codeOf(21)).toBe('ERR_RECEIPT_FORMAT'); // two parts
    expect(await codeOf(22)).toBe('ERR_RECEIPT_SIGNATURE'); // modified payload
    expect(await codeOf(25)).toBe('ERR_RECEIPT_SIGNATURE'); // modified header (kid)
    expect(await codeOf(31)).toBe('ERR_RECEIPT_ALG'); // HS256 keyed with the EC public key
    expect(await codeOf(32)).toBe('ERR_RECEIPT_HEADER'); // attacker's embedded jwk
    expect(await codeOf(379)).toBe('ERR_RECEIPT_SIGNATURE_ENCODING'); // signature too long
    expect(await codeOf(380)).toBe('ERR_RECEIPT_SIGNATURE_ENCODING'); // trailing zeros
    // r and s each in {0, 1, n-1, n}: any 0 or n is out of range; 1 and n-1 are in range and simply do not verify.
    const inRange = new Set([391, 392, 395, 396]);
    for (let id = 386; id <= 401; id++) {
      expect([id, await codeOf(id)]).toEqual([id, inRange.has(id) ? 'ERR_RECEIPT_SIGNATURE' : 'ERR_RECEIPT_SIGNATURE_ENCODING']);
    }
  });

  it('accepts, across the whole file, exactly the valid cases whose alg is ES256', async () => {
    const all = file.testGroups.flatMap((g) => g.tests.map((t) => ({ t, key: g.public ?? g.private })));
    expect(all.length).toBe(401);
    const accepted: number[] = [];
    const expected: number[] = [];
    for (const { t, key } of all) {
      if ((await outcome(t.jws, key)) === 'valid') accepted.push(t.tcId);
      if (t.result === 'valid' && headerAlg(t.jws) === 'ES256') expected.push(t.tcId);
    }
    expect(accepted).toEqual(expected);
    expect(accepted).toEqual([18, 378]);
  });
});

describe('Wycheproof json_web_key_test.json', () => {
  const file = load<JwsFile>('wycheproof/json_web_key_test.json');
  const cases = file.testGroups.flatMap((g) => g.tests.map((t) => ({ t, key: g.public ?? g.private, group: g.comment })));

  it('accepts none of the 26 cases: the valid ones are HMAC or RSA, which receipts never use', async () => {
    expect(cases.length).toBe(26);
    for (const { t, key } of cases) {
      const got = await outcome(t.jws, key);
      expect([t.tcId, got === 'valid']).toEqual([t.tcId, false]);
      if (t.result === 'valid') expect(headerAlg(t.jws)).not.toBe('ES256');
    }
  });

  it.each([
    [1, 'ERR_JWKS_PRIVATE_KEY'], // mixed symmetric and EC key set
    [4, 'ERR_JWKS_DUPLICATE_KID'], // two keys share a kid
    [19, 'ERR_JWKS_NO_USABLE_KEY'], // alg ES521 on a P-256 key
    [20, 'ERR_JWKS_NO_USABLE_KEY'], // alg ES224 on a P-256 key
    [21, 'ERR_JWKS_NO_USABLE_KEY'], // use: enc
    [22, 'ERR_JWKS_NO_USABLE_KEY'], // point not on the curve
    [23, 'ERR_JWKS_NO_USABLE_KEY'], // crv P-384
    [24, 'ERR_JWKS_NO_USABLE_KEY'], // kty RSA
    [5, 'ERR_RECEIPT_ALG'], // RS256 with an RSA key
  ])('case %i is refused with %s', async (id, code) => {
    const c = cases.find((x) => x.t.tcId === id)!;
    expect(await outcome(c.t.jws, c.key)).toBe(code);
  });

  it('says why each refused key of the EC cases was skipped', async () => {
    const reasons = async (id: number) => (await importJwks(cases.find((x) => x.t.tcId === id)!.key)).skipped.map((s) => s.reason);
    expect(await reasons(19)).toEqual(['alg is "ES521", not "ES256"']);
    expect(await reasons(21)).toEqual(['use is "enc", not "sig"']);
    expect(await reasons(22)).toEqual(['x, y is not a point on P-256']);
    expect(await reasons(23)).toEqual(['crv is "P-384", not "P-256"']);
    expect(await reasons(24)).toEqual(['kty is "RSA", not "EC"']);
  });
});
