import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttestedFetch } from '../../src/client/index.ts';
import { remediesFor } from '../../src/client/check-remedies.ts';
import { fail, notPinned, pass } from '../../src/verify/check.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

let engine: TestEngine;
let sigil: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
});
afterAll(async () => {
  await sigil.close(0);
  await engine.close();
});

describe('the not-verified error names the option that would accept each failed check', () => {
  it('a development service: allowNoTee, and why accepting it is a risk', async () => {
    const error = await createAttestedFetch({ baseURL: `${sigil.url}/v1` }).catch((e: unknown) => e as Error);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(/^the service's attestation did not verify, so nothing was sent: NOT VERIFIED: 2 of 11 checks failed/);
    expect((error as Error).message).toMatch(
      /\. allowNoTee would accept attestation\.tls_key, attestation\.tee, attestation\.manifest; the risk: the service runs on no hardware enclave, so nothing vouches for its code or keys: anyone who runs a copy can sign the same answers \(fine for a development service on your own machine\)\.$/,
    );
  });

  it('with allowNoTee given, the same service is accepted', async () => {
    const attested = await createAttestedFetch({ baseURL: `${sigil.url}/v1`, allowNoTee: true });
    await attested.close();
  });
});

describe('remediesFor', () => {
  it('on hardware, a value nobody pinned needs allowUnpinnedCode; a measurement that differs is accepted by no option', () => {
    const checks = [
      pass('attestation.tee', 'tee is sev-snp'),
      notPinned('attestation.manifest', 'manifest X, compared with nothing'),
      fail('reference.measurement', 'measurement Y is not a reference value'),
    ];
    const { remedies, unaccepted } = remediesFor(checks);
    expect(remedies.map((r) => [r.option, r.flag, r.checks])).toEqual([['allowUnpinnedCode', '--allow-unpinned-code', ['attestation.manifest']]]);
    expect(unaccepted.map((c) => c.name)).toEqual(['reference.measurement']);
  });
});
