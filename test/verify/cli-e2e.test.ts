import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { VerifyReport } from '../../src/cli/verify.ts';
import { startTestEngine } from '../support/test-engine.ts';
import type { TestEngine } from '../support/test-engine.ts';
import { startTestSigil } from '../support/sigil.ts';
import type { TestSigil } from '../support/sigil.ts';
import { runSigilVerify } from '../support/cli.ts';

const NO_TEE = 'no hardware evidence exists: this service is not running in a TEE';

const sigilVerify = (argv: string[]) => runSigilVerify(argv);

const failing = (stdout: string) => [...stdout.matchAll(/^FAIL (\S+) — /gm)].map((m) => m[1]);

describe.each(['vllm', 'llamacpp'] as const)('sigil verify against a running Sigil (provider none, %s engine, brand Acme)', (format) => {
  let engine: TestEngine;
  let sigil: TestSigil;

  beforeAll(async () => {
    engine = await startTestEngine({ format, modelNames: ['m', 'engine-name'] });
    sigil = await startTestSigil({
      upstreams: { main: { url: engine.baseUrl } },
      models: [{ id: 'm' }, { id: 'n', upstream_model: 'engine-name' }],
      config: { brand: 'Acme', attestation: { provider: 'none' }, log: { level: 'silent' } },
    });
  });
  afterAll(async () => {
    await sigil.close();
    await engine.close();
  });

  it('reports every receipt check of a JSON completion and says plainly that there is no TEE', async () => {
    const r = await sigilVerify(['--url', sigil.url, '--api-key', sigil.key, '--brand', 'Acme', '--model', 'm']);
    expect(r.stderr).toBe('');
    expect(failing(r.stdout)).toEqual(['attestation.tls_key', 'attestation.tee', 'receipt.tee']);
    expect(r.stdout).toContain(`FAIL receipt.tee — tee is "none": ${NO_TEE}\n`);
    expect(r.stdout).toContain(
      'FAIL attestation.tee — tee is "none": no hardware evidence exists, this service is not running in a hardware enclave and nothing it says is vouched for\n',
    );
    for (const name of [
      'receipt.signature',
      'receipt.nonce',
      'receipt.measurement',
      'receipt.policy_hash',
      'receipt.request_hash',
      'receipt.response_hash',
      'receipt.completion_id',
      'policy.model',
      'attestation.jwks',
      'attestation.report_data',
      'attestation.hpke_key',
      'attestation.policy',
    ]) {
      expect(r.stdout).toMatch(new RegExp(`^PASS ${name.replace('.', '\\.')} — `, 'm'));
    }
    expect(r.code).toBe(1);
  });

  it('passes a JSON completion with --allow-no-tee', async () => {
    const r = await sigilVerify(['--url', sigil.url, '--api-key', sigil.key, '--brand', 'Acme', '--allow-no-tee', '--json']);
    const report = JSON.parse(r.stdout) as VerifyReport;
    expect(report.checks.filter((c) => !c.ok).map((c) => [c.name, c.waived])).toEqual([
      ['attestation.tls_key', '--allow-no-tee: a development service without hardware'],
      ['attestation.tee', '--allow-no-tee: a development service without hardware'],
      ['attestation.manifest', '--allow-no-tee: a development service without hardware'],
      ['receipt.tee', '--allow-no-tee: a development service without hardware'],
    ]);
    expect(report.ok).toBe(true);
    expect(report.outcome).toBe('verified-with-waivers');
    expect(report.claims?.tee).toBe('none');
    expect(report.claims?.receipt_type).toBe('message');
    expect(r.code).toBe(0);
  });

  it('passes a streamed completion whose model name the proxy rewrites, with both receipts', async () => {
    const r = await sigilVerify(['--url', sigil.url, '--api-key', sigil.key, '--brand', 'Acme', '--allow-no-tee', '--stream', '--model', 'n']);
    expect(failing(r.stdout)).toEqual([]);
    expect(r.stdout).toContain('message receipt from the stream comment');
    expect(r.stdout).toMatch(/^PASS model_receipt\.signature — /m);
    expect(r.stdout).toMatch(/^PASS live\.receipt_id — /m);
    expect(r.code).toBe(0);
  });

  it('fails with the default brand, whose headers this service does not read', async () => {
    const r = await sigilVerify(['--url', sigil.url, '--api-key', sigil.key, '--allow-no-tee']);
    expect(r.code).toBe(3);
    expect(r.stderr).toBe('sigil verify: could not verify: the response carries no X-Service-Receipt header\n');
  });
});
