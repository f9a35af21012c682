import { beforeAll, describe, expect, it } from 'vitest';
import { checkMark, verdictOf, type Check } from '../../src/verify/check.ts';
import { canonicalPolicyHash, sha256Tagged } from '../../src/verify/digest.ts';
import { NO_TEE_DETAIL, verifyReceipt } from '../../src/verify/receipt.ts';
import { MEASUREMENT, POLICY_HASH, REQUEST_BYTES, RESPONSE_BYTES, b64url, makeSigner, messageClaims, signCompact } from './receipt-fixtures.ts';
import type { TestSigner } from './receipt-fixtures.ts';

const failing = (checks: Check[]) => checks.filter((c) => !c.ok && c.waived === undefined).map((c) => c.name);
const byName = (checks: Check[], name: string) => checks.find((c) => c.name === name);

describe('verifyReceipt', () => {
  let signer: TestSigner;
  let jwks: { keys: unknown[] };
  const expected = {
    nonce: 'n-123',
    measurement: MEASUREMENT,
    policyHash: POLICY_HASH,
    requestBytes: REQUEST_BYTES,
    responseBytes: RESPONSE_BYTES,
    receiptType: 'message' as const,
    modelId: 'm1',
    attestationHash: sha256Tagged('evidence'),
  };

  beforeAll(async () => {
    signer = await makeSigner();
    jwks = { keys: [signer.publicJwk] };
  });

  it('passes every check of a genuine message receipt, in a fixed order', async () => {
    const result = await verifyReceipt(signer.sign(messageClaims()), { jwks, expected });
    expect(result.checks.map((c) => [c.name, c.ok])).toEqual([
      ['receipt.jwks', true],
      ['receipt.signature', true],
      ['receipt.claims', true],
      ['receipt.schema_version', true],
      ['receipt.receipt_type', true],
      ['receipt.nonce', true],
      ['receipt.measurement', true],
      ['receipt.policy_hash', true],
      ['receipt.model', true],
      ['receipt.request_hash', true],
      ['receipt.response_hash', true],
      ['receipt.attestation_hash', true],
      ['receipt.issued_at', true],
      ['receipt.tee', true],
    ]);
    expect(result.kid).toBe(signer.kid);
    expect(result.claims?.receipt_id).toBe('rcpt_0001');
    expect(byName(result.checks, 'receipt.signature')?.detail).toBe(`ES256 signature verifies under key ${signer.kid} (JWKS index 0)`);
  });

  it('fails response_hash when one response byte differs, naming both hashes', async () => {
    const tampered = Buffer.from(RESPONSE_BYTES);
    tampered[5] = tampered[5]! ^ 0x20;
    const result = await verifyReceipt(signer.sign(messageClaims()), { jwks, expected: { ...expected, responseBytes: tampered } });
    expect(failing(result.checks)).toEqual(['receipt.response_hash']);
    expect(byName(result.checks, 'receipt.response_hash')?.detail).toBe(
      `response_hash is ${sha256Tagged(RESPONSE_BYTES)}; the ${tampered.length} bytes given hash to ${sha256Tagged(tampered)}`,
    );
  });

  it('fails request_hash when the request differs', async () => {
    const result = await verifyReceipt(signer.sign(messageClaims()), { jwks, expected: { ...expected, requestBytes: Buffer.from('{}') } });
    expect(failing(result.checks)).toEqual(['receipt.request_hash']);
  });

  it('stops at the signature when a payload byte was changed, and reports no claims', async () => {
    const [h, , s] = signer.sign(messageClaims()).split('.');
    const forged = `${h}.${b64url(JSON.stringify(messageClaims({ enclave_measurement: 'cd'.repeat(48) })))}.${s}`;
    const result = await verifyReceipt(forged, { jwks, expected });
    expect(result.checks.map((c) => c.name)).toEqual(['receipt.jwks', 'receipt.signature']);
    expect(failing(result.checks)).toEqual(['receipt.signature']);
    expect(byName(result.checks, 'receipt.signature')?.detail).toBe('ERR_RECEIPT_SIGNATURE: none of the 1 acceptable key(s) verifies the signature');
    expect(result.claims).toBeUndefined();
  });

  it('fails the signature for a tampered header and for alg none', async () => {
    const [, p, s] = signer.sign(messageClaims()).split('.');
    const header = b64url(JSON.stringify({ alg: 'ES256', typ: 'JWT', kid: 'other' }));
    expect(byName((await verifyReceipt(`${header}.${p}.${s}`, { jwks, expected })).checks, 'receipt.signature')?.ok).toBe(false);
    const none = `${b64url('{"alg":"none"}')}.${p}.`;
    expect(byName((await verifyReceipt(none, { jwks, expected })).checks, 'receipt.signature')?.detail).toBe(
      'ERR_RECEIPT_ALG: alg is "none"; only ES256 is accepted',
    );
  });

  it('fails the nonce when it differs, and when one was expected but the receipt has ""', async () => {
    const token = signer.sign(messageClaims());
    expect(failing((await verifyReceipt(token, { jwks, expected: { ...expected, nonce: 'other' } })).checks)).toEqual(['receipt.nonce']);
    const unnonced = signer.sign(messageClaims({ nonce: '' }));
    expect(failing((await verifyReceipt(unnonced, { jwks, expected })).checks)).toEqual(['receipt.nonce']);
  });

  it('expects nonce "" when none was sent', async () => {
    const { nonce: _omit, ...rest } = expected;
    const withNonce = await verifyReceipt(signer.sign(messageClaims()), { jwks, expected: rest });
    expect(byName(withNonce.checks, 'receipt.nonce')).toEqual({ name: 'receipt.nonce', ok: false, detail: 'nonce is "n-123"; expected ""' });
    const without = await verifyReceipt(signer.sign(messageClaims({ nonce: '' })), { jwks, expected: rest });
    expect(byName(without.checks, 'receipt.nonce')).toEqual({ name: 'receipt.nonce', ok: true, detail: 'nonce is "", as no nonce was sent' });
  });

  it('fails measurement, policy hash, model and attestation hash when they differ', async () => {
    const token = signer.sign(messageClaims());
    const result = await verifyReceipt(token, {
      jwks,
      expected: {
        ...expected,
        measurement: 'CD'.repeat(48),
        policyHash: canonicalPolicyHash({ other: true }),
        modelId: 'm2',
        attestationHash: sha256Tagged('x'),
      },
    });
    expect(failing(result.checks)).toEqual(['receipt.measurement', 'receipt.policy_hash', 'receipt.model', 'receipt.attestation_hash']);
    expect(byName(result.checks, 'receipt.measurement')?.detail).toBe(`enclave_measurement is ${MEASUREMENT}; expected ${'cd'.repeat(48)}`);
  });

  it('compares the measurement case-insensitively on the expected side', async () => {
    const result = await verifyReceipt(signer.sign(messageClaims()), { jwks, expected: { ...expected, measurement: MEASUREMENT.toUpperCase() } });
    expect(failing(result.checks)).toEqual([]);
  });

  it('says plainly that tee none has no hardware evidence, and fails unless allowed', async () => {
    const { attestation_hash: _omit, ...claims } = messageClaims({ tee: 'none' });
    const token = signer.sign(claims);
    const refused = await verifyReceipt(token, { jwks, expected });
    expect(failing(refused.checks)).toEqual(['receipt.tee']);
    expect(byName(refused.checks, 'receipt.tee')?.detail).toBe(`tee is "none": ${NO_TEE_DETAIL}`);
    expect(NO_TEE_DETAIL).toBe('no hardware evidence exists: this service is not running in a TEE');
    const allowed = await verifyReceipt(token, { jwks, expected, allowNoTee: true });
    expect(failing(allowed.checks)).toEqual([]);
    expect(byName(allowed.checks, 'receipt.tee')).toEqual({
      name: 'receipt.tee',
      ok: false,
      detail: `tee is "none": ${NO_TEE_DETAIL}`,
      waived: 'no-TEE receipts allowed (development)',
    });
  });

  it('refuses a receipt type other than the one expected, and request bytes against a model receipt', async () => {
    const { completion_id: _c, request_hash: _q, response_hash: _r, ...model } = messageClaims({ receipt_type: 'model' });
    const result = await verifyReceipt(signer.sign(model), { jwks, expected });
    expect(failing(result.checks)).toEqual(['receipt.receipt_type', 'receipt.request_hash', 'receipt.response_hash']);
    expect(byName(result.checks, 'receipt.request_hash')?.detail).toBe('a model receipt does not cover the request bytes; verify the message receipt');
    const { requestBytes: _a, responseBytes: _b, ...modelExpected } = expected;
    expect(failing((await verifyReceipt(signer.sign(model), { jwks, expected: { ...modelExpected, receiptType: 'model' } })).checks)).toEqual([]);
  });

  it('fails claims that are missing or malformed, listing each', async () => {
    const result = await verifyReceipt(signer.sign({ ...messageClaims(), enclave_measurement: 'XYZ', policy_hash: 'md5:1', request_hash: undefined }), {
      jwks,
      expected,
    });
    expect(failing(result.checks)).toEqual(['receipt.claims']);
    expect(byName(result.checks, 'receipt.claims')?.detail).toBe(
      'enclave_measurement is not lowercase hex; policy_hash is not "sha256:" + 64 hex; request_hash is not "sha256:" + 64 hex',
    );
  });

  it('fails schema versions it does not understand, and issued_at that disagrees with iat or lies in the future', async () => {
    expect(failing((await verifyReceipt(signer.sign(messageClaims({ schema_version: '2.0.0' })), { jwks, expected })).checks)).toEqual([
      'receipt.schema_version',
    ]);
    const claims = messageClaims();
    expect(failing((await verifyReceipt(signer.sign({ ...claims, iat: claims.iat + 7 }), { jwks, expected })).checks)).toEqual(['receipt.issued_at']);
    const later = new Date(Date.now() + 3_600_000);
    const future = messageClaims({ issued_at: later.toISOString(), iat: Math.floor(later.getTime() / 1000) });
    expect(failing((await verifyReceipt(signer.sign(future), { jwks, expected })).checks)).toEqual(['receipt.issued_at']);
  });

  it('verifies with the second key when the first does not', async () => {
    const first = await makeSigner();
    const result = await verifyReceipt(signer.sign(messageClaims()), { jwks: { keys: [first.publicJwk, signer.publicJwk] }, expected });
    expect(failing(result.checks)).toEqual([]);
    expect(byName(result.checks, 'receipt.signature')?.detail).toBe(`ES256 signature verifies under key ${signer.kid} (JWKS index 1)`);
  });

  it('fails receipt.jwks for a duplicate kid, a private key, or no usable key, before any signature work', async () => {
    const token = signer.sign(messageClaims());
    const dup = await verifyReceipt(token, { jwks: { keys: [signer.publicJwk, signer.publicJwk] }, expected });
    expect(dup.checks).toEqual([{ name: 'receipt.jwks', ok: false, detail: `ERR_JWKS_DUPLICATE_KID: two keys in the JWKS have kid "${signer.kid}"` }]);
    const enc = await verifyReceipt(token, { jwks: { keys: [{ ...signer.publicJwk, use: 'enc' }] }, expected });
    expect(enc.checks).toEqual([
      { name: 'receipt.jwks', ok: false, detail: `no P-256 ES256 signature key in the JWKS; skipped key 0 (kid ${signer.kid}): use is "enc", not "sig"` },
    ]);
    const priv = await verifyReceipt(token, { jwks: { keys: [signer.privateKey.export({ format: 'jwk' })] }, expected });
    expect(priv.checks).toEqual([{ name: 'receipt.jwks', ok: false, detail: 'ERR_JWKS_PRIVATE_KEY: key 0 carries the private member "d"' }]);
  });

  it('never throws on garbage input', async () => {
    for (const token of [
      '',
      'a.b',
      'a.b.c',
      '...',
      signCompact(signer.privateKey, { alg: 'ES256' }, '[1,2]'),
      signCompact(signer.privateKey, { alg: 'ES256' }, 'not json'),
    ]) {
      const result = await verifyReceipt(token, { jwks, expected });
      expect(result.checks.some((c) => !c.ok)).toBe(true);
    }
    expect((await verifyReceipt('x.y.z', { jwks: 'nope' as unknown as { keys: unknown[] } })).checks[0]?.detail).toBe(
      'ERR_JWKS_INVALID: the JWKS is not an object with a keys array',
    );
  });
});

describe('canonicalPolicyHash', () => {
  it('hashes the RFC 8785 form, so key order and spacing do not matter', () => {
    const a = canonicalPolicyHash({ b: 1, a: [1, 2, { d: 'x', c: 1e21 }] });
    const b = canonicalPolicyHash(JSON.parse('{ "a" : [1,2,{"c":1e21,"d":"x"}], "b": 1.0 }'));
    expect(a).toBe(b);
    expect(a).toBe(sha256Tagged('{"a":[1,2,{"c":1e+21,"d":"x"}],"b":1}'));
  });
});

describe('a library caller that gives only the JWKS (issue 10)', () => {
  it('gets each required expectation as a failure saying what to give, or as waived with the reason given', async () => {
    const signer = await makeSigner();
    const jwks = { keys: [signer.publicJwk] };
    const jws = signer.sign(messageClaims());
    const nonce = (JSON.parse(Buffer.from(jws.split('.')[1]!, 'base64url').toString()) as { nonce: string }).nonce;
    const bare = await verifyReceipt(jws, { jwks, expected: { nonce } });
    // Before: every check that ran passed, and these four were simply left out.
    expect(bare.checks.filter((c) => !c.ok).map((c) => [c.name, c.detail])).toEqual([
      ['receipt.measurement', 'not checked: no expected launch measurement was given (expected.measurement), nor waived'],
      ['receipt.policy_hash', 'not checked: no expected policy hash was given (expected.policyHash), nor waived'],
      ['receipt.request_hash', 'not checked: no expected request body was given (expected.requestBytes), nor waived'],
      ['receipt.response_hash', 'not checked: no expected response body was given (expected.responseBytes), nor waived'],
    ]);
    const waived = await verifyReceipt(jws, {
      jwks,
      expected: { nonce, measurement: MEASUREMENT, policyHash: POLICY_HASH },
      waive: { requestBytes: 'the request was not kept', responseBytes: 'the response was not kept' },
    });
    // Waived is not passed: each stays ok: false, carries the caller's reason, and the verdict lists it.
    expect(waived.checks.filter((c) => !c.ok).map((c) => [checkMark(c), c.name, c.waived])).toEqual([
      ['WAIVED', 'receipt.request_hash', 'the request was not kept'],
      ['WAIVED', 'receipt.response_hash', 'the response was not kept'],
    ]);
    expect(verdictOf(waived.checks).outcome).toBe('verified-with-waivers');
  });
});
