import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { explain } from '../../src/trust-page/explain.ts';
import { verifyService } from '../../src/trust-page/verify-service.ts';
import { describeCheck } from '../../src/verify/check-registry.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

// The trust page's verification, run in Node (no browser) against a real Sigil: the checks it shows, by the
// names and in the words of the verifier's one check registry.

let engine: TestEngine;
let sigil: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['chat-model'] });
  sigil = await startTestSigil({ upstreams: { main: { url: engine.baseUrl } }, models: [{ id: 'chat-model' }] });
}, 60_000);

afterAll(async () => {
  await sigil?.close();
  await engine?.close();
});

describe('the trust page\'s verification, without a browser', () => {
  it('verifies a development service: every binding check passes and the missing hardware fails', async () => {
    const report = await verifyService(sigil.url);
    expect(report.verdict).toBe('development');
    expect(report.checks.map((c) => `${c.status} ${c.name}`)).toEqual([
      'pass binding.nonce',
      'pass binding.jwks',
      'pass binding.report_data',
      'pass binding.policy',
      'pass binding.hpke',
      'note binding.tls',
      'note binding.gpu',
      'fail attestation.tee',
    ]);
    expect(report.models.map((m) => m.id)).toEqual(['chat-model']);
    expect(report.hpkeKeyConfig?.length).toBeGreaterThan(0);
  });

  it('names every check it shows as the verifier\'s check registry does, and explains it in the registry\'s words', async () => {
    const report = await verifyService(sigil.url);
    for (const check of report.checks) {
      const declared = describeCheck(check.name);
      expect(declared, check.name).toBeDefined();
      expect(explain(check.name)).toEqual({ title: declared!.title, why: declared!.explains });
    }
  });

  it('fails a service it cannot read with a check the registry declares, saying why', async () => {
    const report = await verifyService('http://127.0.0.1:9');
    expect(report.verdict).toBe('failed');
    expect(report.checks.map((c) => `${c.status} ${c.name}`)).toEqual(['fail attestation.document']);
    expect(report.checks[0]!.detail).toMatch(/^could not read the service: /);
    expect(describeCheck(report.checks[0]!.name)?.title).toBe('Attestation document');
  });
});
