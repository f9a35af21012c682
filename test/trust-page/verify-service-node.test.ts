import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { explain } from '../../src/trust-page/explain.ts';
import { verifyService } from '../../src/trust-page/verify-service.ts';
import { describeCheck } from '../../src/verify/check-registry.ts';
import { checkMark, type Check } from '../../src/verify/check.ts';
import { attest } from '../../src/client/attest.ts';
import { verifyCommand, type VerifyReport } from '../../src/cli/verify.ts';
import { Readable } from 'node:stream';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

// The trust page's verification, run in Node (no browser) against a real Sigil: the checks it shows, by the
// names and in the words of the verifier's one check registry.

const marks = (checks: Check[]) => checks.map((c) => `${checkMark(c)} ${c.name}`);

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

describe("the trust page's verification, without a browser", () => {
  it('verifies a development service with the one core: what it can check passes, the missing hardware and plain HTTP are waived as development', async () => {
    const report = await verifyService(sigil.url);
    expect(report.headline).toBe('development');
    expect(report.verdict.outcome).toBe('verified-with-waivers');
    expect(marks(report.checks)).toEqual([
      'WAIVED attestation.tls_key',
      'PASS attestation.hpke_key',
      'PASS attestation.ohttp_key',
      'WAIVED attestation.tee',
      'PASS attestation.nonce',
      'PASS attestation.report_data',
      'PASS attestation.jwks',
      'WAIVED attestation.manifest',
      'PASS gpu.evidence',
      'PASS attestation.policy',
    ]);
    expect(report.verdict.summary).toBe('verified with waivers: 7 checks passed; 3 waived (attestation.tls_key, attestation.tee, attestation.manifest)');
    expect(report.models.map((m) => m.id)).toEqual(['chat-model']);
    expect(report.facts?.hpkeKeyConfig?.length).toBeGreaterThan(0);
  });

  it('reaches the verdict the attested client and sigil verify reach for the same service, check by check', async () => {
    const page = await verifyService(sigil.url);
    // The page asks for a fresh report, as sigil verify does; the client's default is the signed nonce.
    // A development service: the page waives its missing hardware as the tour's `sigil verify --allow-no-tee` does.
    const client = await attest({ baseURL: sigil.url, freshReport: true, waive: { noHardwareEnclave: 'development' } });
    expect(marks(page.checks)).toEqual(marks(client.checks));
    expect(page.verdict.summary).toBe(client.verdict.summary);
    let stdout = '';
    await verifyCommand(['--url', sigil.url, '--api-key', sigil.key, '--json', '--allow-no-tee'], {
      stdout: { write: (t: string) => (stdout += t) },
      stderr: { write: () => true },
      stdin: Readable.from([]),
      env: {},
    });
    const cli = (JSON.parse(stdout) as VerifyReport).checks.filter((c) => !/^(receipt|live|policy)\./.test(c.name));
    expect(marks(cli)).toEqual(marks(page.checks));
    // The same words, too: only our nonce and the port differ.
    const words = (checks: Check[]) => checks.map((c) => c.detail.replace(/[0-9a-f]{64}/g, 'NONCE'));
    expect((JSON.parse(stdout) as VerifyReport).outcome).toBe('verified-with-waivers');
    expect(words(cli)).toEqual(words(page.checks));
  });

  it("names every check it shows as the verifier's check registry does, and explains it in the registry's words", async () => {
    const report = await verifyService(sigil.url);
    for (const check of report.checks) {
      const declared = describeCheck(check.name);
      expect(declared, check.name).toBeDefined();
      expect(explain(check.name)).toEqual({ title: declared!.title, why: declared!.explains });
    }
  });

  it('fails a service it cannot read with a check the registry declares, saying why', async () => {
    const report = await verifyService('http://127.0.0.1:9');
    expect(report.headline).toBe('failed');
    expect(report.verdict.outcome).toBe('not-verified');
    expect(marks(report.checks)).toEqual(['FAIL attestation.document']);
    expect(report.checks[0]!.detail).toMatch(/^could not read the service: /);
    expect(describeCheck(report.checks[0]!.name)?.title).toBe('Attestation document');
  });
});
