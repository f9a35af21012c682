import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AttestationError, createAttestedFetch } from '../../src/client/index.ts';
import { checkMark, type Check } from '../../src/verify/check.ts';
import { startFakeService, type FakeService } from '../verify/cli-server.ts';
import { makeSigner } from '../verify/receipt-fixtures.ts';
import { startTestEngine } from '../support/test-engine.ts';
import { startTestSigil } from '../support/sigil.ts';

/** docs/attestation.md, "Freshness from a signed nonce": what the attested client refuses. */
let service: FakeService;

beforeAll(async () => {
  service = await startFakeService(await makeSigner());
});
afterAll(async () => service.close());
beforeEach(() => {
  service.faults = {};
});

const refusal = async (): Promise<AttestationError> => {
  const error = await createAttestedFetch({ baseURL: `${service.url}/v1`, allowNoTee: true }).catch((err: unknown) => err);
  expect(error).toBeInstanceOf(AttestationError);
  return error as AttestationError;
};
const failed = (checks: readonly Check[]) => checks.filter((c) => checkMark(c) === 'FAIL').map((c) => `${c.name}: ${c.detail}`);

describe('the attested client and a signed nonce', () => {
  it('asks for a signed nonce, not a hardware report, and passes it when our nonce is signed by the bound key', async () => {
    const attested = await createAttestedFetch({ baseURL: `${service.url}/v1`, allowNoTee: true });
    await attested.close();
    expect(service.attestationNonces).toEqual([]);
    const sent = service.signedNonces.at(-1)!;
    expect(sent).toMatch(/^[0-9a-f]{64}$/);
    const check = attested.attestation.checks.find((c) => c.name === 'attestation.signed_nonce')!;
    expect(checkMark(check)).toBe('PASS');
    expect(check.detail).toContain(`our fresh nonce ${sent} is signed by the receipt key`);
  });

  it('refuses a signature over another nonce (a recorded answer), sending nothing', async () => {
    service.faults.staleAttestation = true;
    const error = await refusal();
    const sent = service.signedNonces.at(-1)!;
    expect(failed(error.checks)).toEqual([`attestation.signed_nonce: the signed nonce is "${'ee'.repeat(32)}"; we sent ${sent}`]);
  });

  it('refuses a nonce signed by a key the start evidence does not bind', async () => {
    service.faults.foreignNonceKey = await makeSigner();
    const error = await refusal();
    expect(failed(error.checks)).toEqual([
      'attestation.signed_nonce: the nonce is not signed by a key the start evidence binds: none of the 1 acceptable key(s) verifies the signature',
    ]);
  });

  it('asks for a fresh report when the start evidence binds another JWKS than the one served (a fleet grown since start), and verifies that', async () => {
    service.faults.startBindsOtherJwks = await makeSigner();
    const reports = service.attestationNonces.length;
    const attested = await createAttestedFetch({ baseURL: `${service.url}/v1`, allowNoTee: true });
    await attested.close();
    expect(service.attestationNonces).toHaveLength(reports + 1);
    expect(failed(attested.attestation.checks)).toEqual([]);
    expect(attested.attestation.checks.map((c) => c.name)).not.toContain('attestation.signed_nonce');
  });

  it('with freshReport asks for a hardware report instead, and has no signed-nonce check', async () => {
    const [reports, signatures] = [service.attestationNonces.length, service.signedNonces.length];
    const attested = await createAttestedFetch({ baseURL: `${service.url}/v1`, allowNoTee: true, freshReport: true });
    await attested.close();
    expect([service.attestationNonces.length, service.signedNonces.length]).toEqual([reports + 1, signatures]);
    expect(attested.attestation.checks.map((c) => c.name)).not.toContain('attestation.signed_nonce');
  });
});

describe('a signed nonce after a catalogue reload', () => {
  it('comes with a start document binding the new policy, so a development service still attests', async () => {
    const engine = await startTestEngine({ modelNames: ['m'] });
    const sigil = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
    try {
      const catalogue = join(sigil.dir, 'models.yaml');
      await writeFile(catalogue, (await readFile(catalogue, 'utf8')).replace('sha256:' + '01'.repeat(32), 'sha256:' + '02'.repeat(32)));
      expect(await sigil.reload()).toMatchObject({ catalogue: true });
      const attested = await createAttestedFetch({ baseURL: `${sigil.url}/v1`, allowNoTee: true });
      await attested.close();
      expect(failed(attested.attestation.checks)).toEqual([]);
      expect(attested.attestation.checks.map((c) => c.name)).toContain('attestation.signed_nonce');
    } finally {
      await sigil.close(0);
      await engine.close();
    }
  });
});
