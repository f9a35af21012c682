import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyCommand, type VerifyReport } from '../../src/cli/verify.ts';
import { AEAD_AES_256_GCM, encodeKeyConfig, encodeKeyConfigs, KDF_HKDF_SHA256, KEM_X25519_HKDF_SHA256, type KeyConfig } from '../../src/protocol/ohttp.ts';
import { ohttpKeyCheck } from '../../src/verify/ohttp-key.ts';
import { startForgingProxy, type ForgingProxy } from '../support/forging-proxy.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/**
 * Issue 51: `sigil verify` holds the Oblivious HTTP gateway's key to the attestation. A served Sigil passes; a stand-in
 * that relays a real attestation but serves another key at /.well-known/ohttp-gateway fails, with a sentence that
 * says what that means; a service without a gateway is neither: a note says it offers none.
 */
let engine: TestEngine;
let sigil: TestSigil;
let noGateway: TestSigil;
let standIn: ForgingProxy;

/**
 * Another X25519 key configuration, key ID 0 and the same suite: only the key differs from the enclave's. Every byte is
 * below 0x80, so the forging proxy's text body carries exactly these bytes.
 */
const OTHER_KEYS = Buffer.from(
  encodeKeyConfigs([
    {
      keyId: 0,
      kemId: KEM_X25519_HKDF_SHA256,
      publicKey: randomBytes(32).map((b) => b & 0x7f),
      algorithms: [{ kdfId: KDF_HKDF_SHA256, aeadId: AEAD_AES_256_GCM }],
    },
  ]),
);

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({ upstreams: { main: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
  noGateway = await startTestSigil({ upstreams: { main: { url: engine.baseUrl } }, models: [{ id: 'm' }], config: { ehbp: { enabled: false } } });
  standIn = await startForgingProxy(sigil.url);
  standIn.forge = (method, path) =>
    method === 'GET' && path === '/.well-known/ohttp-gateway'
      ? { status: 200, headers: { 'content-type': 'application/ohttp-keys' }, body: OTHER_KEYS.toString('ascii') }
      : undefined;
});
afterAll(async () => {
  await standIn.close();
  await noGateway.close(0);
  await sigil.close(0);
  await engine.close();
});

async function verify(argv: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await verifyCommand(argv, {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    stdin: Readable.from([]),
    env: {},
  });
  return { code, stdout, stderr };
}

const PASSED =
  'PASS attestation.ohttp_key — the key served at /.well-known/ohttp-gateway is the one the enclave binds as hpke_key_config: ' +
  'a request sealed to it and sent through a relay opens only inside the enclave\n';

describe('sigil verify: the Oblivious HTTP gateway key', () => {
  it('a served Sigil: the gateway key is the attested one, under its title and plain words (-v)', async () => {
    const r = await verify(['-v', '--url', sigil.url, '--api-key', sigil.key, '--model', 'm', '--allow-no-tee']);
    expect([r.code, r.stderr]).toEqual([0, '']);
    expect(r.stdout).toContain(
      '# Oblivious HTTP gateway key: The gateway key that requests sent through an Oblivious HTTP relay are sealed to is the enclave key the attestation vouches for, so neither the relay nor the operator can read what passes through it. (docs/ohttp.md#checking-the-gateway-key)\n' +
        PASSED,
    );
    expect(r.stdout).not.toContain('Oblivious HTTP gateway (docs/ohttp.md)');
  });

  it('a stand-in serving a real attestation but another key at the gateway path fails, and says what that means', async () => {
    const r = await verify(['-v', '--url', standIn.url, '--api-key', sigil.key, '--model', 'm', '--allow-no-tee']);
    expect(r.code).toBe(1);
    expect(standIn.forged).toBeGreaterThan(0);
    expect(r.stdout).toContain(
      `FAIL attestation.ohttp_key — the key served at /.well-known/ohttp-gateway (${OTHER_KEYS.toString('base64')}) is not the one the enclave binds as ` +
        'hpke_key_config: a request sealed to it and sent through a relay could be opened outside the enclave, so do not use this gateway\n',
    );
    // The key for encrypted bodies is still the attested one: only the gateway's differs.
    expect(r.stdout).toMatch(/^PASS attestation\.hpke_key — /m);
    const json = JSON.parse((await verify(['--json', '--url', standIn.url, '--api-key', sigil.key, '--model', 'm', '--allow-no-tee'])).stdout) as VerifyReport;
    expect(json.checks.filter((c) => !c.ok && c.waived === undefined).map((c) => c.name)).toEqual(['attestation.ohttp_key']);
    expect(json.outcome).toBe('not-verified');
  });

  it('the one-line verdict of the stand-in names the failed check', async () => {
    const r = await verify(['--url', standIn.url, '--api-key', sigil.key, '--model', 'm', '--allow-no-tee']);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^NOT VERIFIED: 1 of \d+ checks failed; .*\(sigil verify -v lists every check\)\n$/);
  });

  it('a page where the key should be (a 200 that is not application/ohttp-keys) fails: the key could not be read', async () => {
    const forge = standIn.forge;
    standIn.forge = (method, path) =>
      method === 'GET' && path === '/.well-known/ohttp-gateway' ? { status: 200, headers: { 'content-type': 'text/html' }, body: '<html></html>' } : undefined;
    try {
      const r = await verify(['-v', '--url', standIn.url, '--api-key', sigil.key, '--model', 'm', '--allow-no-tee']);
      expect(r.code).toBe(1);
      expect(r.stdout).toContain(
        `FAIL attestation.ohttp_key — the service answers at /.well-known/ohttp-gateway but its key could not be read (GET ${standIn.url}/.well-known/ohttp-gateway: ` +
          'came as "text/html", not application/ohttp-keys), so it cannot be compared with the one the enclave binds\n',
      );
    } finally {
      standIn.forge = forge;
    }
  });

  it('a service that serves no gateway: no check passes or fails for it, a note says it offers none', async () => {
    const r = await verify(['-v', '--url', noGateway.url, '--api-key', noGateway.key, '--model', 'm', '--allow-no-tee']);
    expect([r.code, r.stderr]).toEqual([0, '']);
    expect(r.stdout).not.toContain('attestation.ohttp_key');
    expect(r.stdout).toContain(
      'note: this service offers no Oblivious HTTP gateway (/.well-known/ohttp-gateway answers 404): requests reach it only directly, ' +
        'so its operator sees which address sends each one (docs/ohttp.md)\n',
    );
    const line = await verify(['--url', noGateway.url, '--api-key', noGateway.key, '--model', 'm', '--allow-no-tee']);
    expect(line.code).toBe(0);
    expect(line.stdout).toMatch(
      /^verified with waivers: \d+ checks passed; .*; note: the service keeps no transparency log \(docs\/log\.md\); note: the service offers no Oblivious HTTP gateway \(docs\/ohttp\.md\) \(sigil verify -v lists every check\)\n$/,
    );
  });
});

describe('attestation.ohttp_key on what was served', () => {
  const config = (keyId: number): KeyConfig => ({
    keyId,
    kemId: KEM_X25519_HKDF_SHA256,
    publicKey: new Uint8Array(32).fill(keyId + 1),
    algorithms: [{ kdfId: KDF_HKDF_SHA256, aeadId: AEAD_AES_256_GCM }],
  });
  const bound = Buffer.from(encodeKeyConfig(config(0))).toString('base64');

  it('the bound configuration alone passes; beside another, it fails: a client may pick the other', () => {
    expect(ohttpKeyCheck(encodeKeyConfigs([config(0)]), bound)?.ok).toBe(true);
    const two = encodeKeyConfigs([config(0), config(1)]);
    expect(ohttpKeyCheck(two, bound)).toEqual({
      name: 'attestation.ohttp_key',
      ok: false,
      detail: `the key served at /.well-known/ohttp-gateway (${Buffer.from(two).toString('base64')}) is not the one the enclave binds as hpke_key_config: a request sealed to it and sent through a relay could be opened outside the enclave, so do not use this gateway`,
    });
  });

  it('a gateway key with no bound key, or one that could not be read, fails; no gateway is no check', () => {
    const served = encodeKeyConfigs([config(0)]);
    expect(ohttpKeyCheck(served, null)).toEqual({
      name: 'attestation.ohttp_key',
      ok: false,
      detail: `the service serves an Oblivious HTTP gateway key (${Buffer.from(served).toString('base64')}) but its attestation binds none (hpke_key_config is null): nothing says a request sealed to it opens only inside the enclave`,
    });
    expect(ohttpKeyCheck(new Error('HTTP 500: boom'), bound)).toEqual({
      name: 'attestation.ohttp_key',
      ok: false,
      detail:
        'the service answers at /.well-known/ohttp-gateway but its key could not be read (HTTP 500: boom), so it cannot be compared with the one the enclave binds',
    });
    expect(ohttpKeyCheck('not served', bound)).toBeUndefined();
  });
});
