import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AttestationError, createAttestedFetch } from '../../src/client/index.ts';
import { checkMark, type Check } from '../../src/verify/check.ts';
import { makeSigner, signCompact } from '../verify/receipt-fixtures.ts';
import { startForgingProxy, type ForgingProxy } from '../support/forging-proxy.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** docs/attestation.md, "Freshness from a signed nonce": what the attested client refuses. */
let engine: TestEngine;
/** Sigil itself, a development service; the proxy in front of it sees each request and makes the faults Sigil never makes. */
let sigil: TestSigil;
let proxy: ForgingProxy;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }], config: { log: { level: 'silent' } } });
  proxy = await startForgingProxy(sigil.url);
});
afterAll(async () => {
  await proxy.close();
  await sigil.close(0);
  await engine.close();
});
beforeEach(() => proxy.reset());

/** The nonces the client asked for, as the proxy saw them: signed nonces (`proof=signature`) or fresh hardware reports. */
const asked = (proof: 'signature' | 'report') =>
  proxy.requests
    .filter((line) => line.startsWith('GET /v1/verify/attestation?') && line.includes('proof=signature') === (proof === 'signature'))
    .map((line) => /nonce=([0-9a-f]+)/.exec(line)![1]!);
/** Changes Sigil's answer to a signed-nonce request before the client reads it. */
const rewriteSignedNonce = (change: (answer: { attestation: { binding: { jwks: { keys: unknown[] } } }; signed_nonce: string }) => void) => {
  proxy.rewrite = (method, path) =>
    path.startsWith('/v1/verify/attestation?') && path.includes('proof=signature')
      ? (body) => {
          const answer = JSON.parse(body.toString()) as Parameters<typeof change>[0];
          change(answer);
          return Buffer.from(JSON.stringify(answer));
        }
      : undefined;
};

const refusal = async (): Promise<AttestationError> => {
  const error = await createAttestedFetch({ baseURL: `${proxy.url}/v1`, allowNoTee: true }).catch((err: unknown) => err);
  expect(error).toBeInstanceOf(AttestationError);
  return error as AttestationError;
};
const failed = (checks: readonly Check[]) => checks.filter((c) => checkMark(c) === 'FAIL').map((c) => `${c.name}: ${c.detail}`);

describe('the attested client and a signed nonce', () => {
  it('asks for a signed nonce, not a hardware report, and passes it when our nonce is signed by the bound key', async () => {
    const attested = await createAttestedFetch({ baseURL: `${proxy.url}/v1`, allowNoTee: true });
    await attested.close();
    expect(asked('report')).toEqual([]);
    const sent = asked('signature').at(-1)!;
    expect(sent).toMatch(/^[0-9a-f]{64}$/);
    const check = attested.attestation.checks.find((c) => c.name === 'attestation.signed_nonce')!;
    expect(checkMark(check)).toBe('PASS');
    expect(check.detail).toContain(`our fresh nonce ${sent} is signed by the receipt key`);
  });

  it('refuses a signature over another nonce (a recorded answer), sending nothing', async () => {
    // The proxy asks Sigil to sign another nonce than the client's: a genuine signature, for someone else.
    proxy.redirect = (method, path) => (path.startsWith('/v1/verify/attestation?') ? path.replace(/nonce=[0-9a-f]+/, `nonce=${'ee'.repeat(32)}`) : path);
    const error = await refusal();
    const sent = asked('signature').at(-1)!;
    expect(failed(error.checks)).toEqual([`attestation.signed_nonce: the signed nonce is "${'ee'.repeat(32)}"; we sent ${sent}`]);
  });

  it('refuses a nonce signed by a key the start evidence does not bind', async () => {
    const foreign = await makeSigner();
    // The same claims and header, signed by a key of the proxy's own.
    rewriteSignedNonce((answer) => {
      const [header, payload] = answer.signed_nonce
        .split('.')
        .slice(0, 2)
        .map((part) => JSON.parse(Buffer.from(part, 'base64url').toString()) as Record<string, unknown>);
      answer.signed_nonce = signCompact(foreign.privateKey, header!, payload);
    });
    const error = await refusal();
    expect(failed(error.checks)).toEqual([
      'attestation.signed_nonce: the nonce is not signed by a key the start evidence binds: none of the 1 acceptable key(s) verifies the signature',
    ]);
  });

  it('asks for a fresh report when the start evidence binds another JWKS than the one served (a fleet grown since start), and verifies that', async () => {
    // As a grown fleet's replica answers: its start evidence binds other keys than the fleet's JWKS it serves now.
    const peer = await makeSigner();
    rewriteSignedNonce((answer) => answer.attestation.binding.jwks.keys.push(peer.publicJwk));
    const reports = asked('report').length;
    const attested = await createAttestedFetch({ baseURL: `${proxy.url}/v1`, allowNoTee: true });
    await attested.close();
    expect(asked('report')).toHaveLength(reports + 1);
    expect(failed(attested.attestation.checks)).toEqual([]);
    expect(attested.attestation.checks.map((c) => c.name)).not.toContain('attestation.signed_nonce');
  });

  it('with freshReport asks for a hardware report instead, and has no signed-nonce check', async () => {
    const [reports, signatures] = [asked('report').length, asked('signature').length];
    const attested = await createAttestedFetch({ baseURL: `${proxy.url}/v1`, allowNoTee: true, freshReport: true });
    await attested.close();
    expect([asked('report').length, asked('signature').length]).toEqual([reports + 1, signatures]);
    expect(attested.attestation.checks.map((c) => c.name)).not.toContain('attestation.signed_nonce');
  });
});

describe('a signed nonce after a catalogue reload', () => {
  it('comes with a start document binding the new policy, so a development service still attests', async () => {
    const reloaded = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
    try {
      const catalogue = join(reloaded.dir, 'models.yaml');
      await writeFile(catalogue, (await readFile(catalogue, 'utf8')).replace('sha256:' + '01'.repeat(32), 'sha256:' + '02'.repeat(32)));
      expect(await reloaded.reload()).toMatchObject({ catalogue: true });
      const attested = await createAttestedFetch({ baseURL: `${reloaded.url}/v1`, allowNoTee: true });
      await attested.close();
      expect(failed(attested.attestation.checks)).toEqual([]);
      expect(attested.attestation.checks.map((c) => c.name)).toContain('attestation.signed_nonce');
    } finally {
      await reloaded.close(0);
    }
  });
});
