import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyCommand } from '../../src/cli/verify.ts';
import type { TrustRoots } from '../../src/verify/attestation.ts';
import { amdCertTable, buildSnpReport, buildTdxQuote, createAmdTestChain, createIntelTestChain } from '../support/evidence-fixtures.ts';
import type { AmdTestChain, IntelTestChain } from '../support/evidence-fixtures.ts';
import { TEST_API_KEY, startFakeService, SERVICE_RTMRS } from './cli-server.ts';
import type { FakeHardware, FakeService } from './cli-server.ts';
import { makeSigner } from './receipt-fixtures.ts';

async function sigilVerify(argv: string[], roots?: TrustRoots): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io = { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: (t: string) => (stderr += t) }, stdin: Readable.from([]), env: {} };
  const code = await verifyCommand(argv, roots === undefined ? io : { ...io, roots });
  return { code, stdout, stderr };
}

/** The service's documents, fetched as an auditor saving them would (its self-signed TLS key is what the evidence binds). */
const insecure = new Agent({ connect: { rejectUnauthorized: false } });
const text = async (url: string) => (await request(url, { dispatcher: insecure })).body.text();

const status = (stdout: string) => [...stdout.matchAll(/^(PASS|FAIL|WAIVED|----) (\S+) — /gm)].map((m) => `${m[1]} ${m[2]}`);
const failing = (stdout: string) => [...stdout.matchAll(/^FAIL (\S+) — /gm)].map((m) => m[1]);
const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');

/** A fake SEV-SNP guest: reports signed by the test VCEK, `evidenceMeasurement` in them whatever the service claims. */
function snpHardware(chain: AmdTestChain, measurement: Buffer, evidenceMeasurement: Buffer = measurement): FakeHardware {
  return {
    tee: 'sev-snp',
    measurement: measurement.toString('hex'),
    evidence: (reportData) => ({
      report: b64(buildSnpReport({ reportData, measurement: evidenceMeasurement }, chain.vcekKey)),
      certificates: b64(amdCertTable(chain)),
    }),
  };
}

function tdxHardware(chain: IntelTestChain, mrTd: Buffer): FakeHardware {
  return {
    tee: 'tdx',
    measurement: mrTd.toString('hex'),
    evidence: (reportData) => ({ quote: b64(buildTdxQuote({ reportData, mrTd, rtmrs: SERVICE_RTMRS }, chain)) }),
  };
}

describe('sigil verify against a service with SEV-SNP evidence (test AMD chain)', () => {
  let chain: AmdTestChain;
  const measurement = randomBytes(48);
  const services: FakeService[] = [];
  const start = async (hardware: FakeHardware) => {
    const service = await startFakeService(await makeSigner(), hardware);
    services.push(service);
    return service;
  };

  beforeAll(async () => {
    chain = await createAmdTestChain();
  });
  afterAll(async () => Promise.all(services.map((s) => s.close())));

  it('passes every check, the hardware ones included, for a JSON and a streamed completion', async () => {
    const service = await start(snpHardware(chain, measurement));
    const r = await sigilVerify(['--url', service.url, '--api-key', TEST_API_KEY, '--allow-unpinned-code'], chain.roots);
    expect(failing(r.stdout)).toEqual([]);
    expect(r.code).toBe(0);
    const lines = status(r.stdout);
    for (const name of [
      'receipt.tee',
      'receipt.attestation_hash',
      'snp.report_signature',
      'snp.vcek_chain',
      'attestation.report_data',
      'attestation.tls_key',
      'attestation.policy',
    ]) {
      expect(lines).toContain(`PASS ${name}`);
    }
    // A receipt naming the measurement the evidence holds pins nothing: only --measurement or reference values do.
    expect(lines).toContain('WAIVED attestation.measurement');
    expect(r.stdout).toContain('PASS receipt.tee — tee is "sev-snp"; the hardware evidence is checked separately\n');
    const streamed = await sigilVerify(
      ['--url', service.url, '--api-key', TEST_API_KEY, '--stream', '--measurement', measurement.toString('hex'), '--allow-unpinned-code'],
      chain.roots,
    );
    expect(failing(streamed.stdout)).toEqual([]);
    expect(streamed.code).toBe(0);
  });

  it('fails the chain against the real AMD roots: a test chain proves nothing', async () => {
    const service = await start(snpHardware(chain, measurement));
    const r = await sigilVerify(['--url', service.url, '--api-key', TEST_API_KEY]);
    expect(r.code).toBe(1);
    expect(failing(r.stdout)).toEqual(['snp.root', 'snp.crl']);
    expect(r.stdout).toMatch(/^FAIL snp\.root — the chain ends at ARK-Test \(SHA-256 [0-9A-F:]+\), which is not a trusted AMD root$/m);
  });

  it("takes AMD's CRL from --collateral DIR when the certificate table carries none, as the attested client's collateral option does", async () => {
    const service = await start({
      ...snpHardware(chain, measurement),
      evidence: (reportData) => ({
        report: b64(buildSnpReport({ reportData, measurement }, chain.vcekKey)),
        certificates: b64(amdCertTable({ ...chain, crl: undefined })),
      }),
    });
    const without = await sigilVerify(['--url', service.url, '--api-key', TEST_API_KEY, '--allow-unpinned-code'], chain.roots);
    expect(failing(without.stdout)).toEqual(['snp.crl']);
    expect(without.code).toBe(1);
    const dir = mkdtempSync(join(tmpdir(), 'sigil-hw-collateral-'));
    writeFileSync(join(dir, 'amd-crl.der'), new Uint8Array(chain.crl.rawData));
    const withBundle = await sigilVerify(['--url', service.url, '--api-key', TEST_API_KEY, '--allow-unpinned-code', '--collateral', dir], chain.roots);
    expect(failing(withBundle.stdout)).toEqual([]);
    expect(withBundle.stdout).toMatch(
      /^PASS snp\.crl — SEV-Test \(serial 02\) is not among the 0 certificate\(s\) ARK-Test revoked \(CRL from the collateral bundle \(amd-crl\.der\)/m,
    );
    expect(withBundle.code).toBe(0);
  });

  it('fails attestation.measurement when the evidence measures other code than the receipts claim', async () => {
    const service = await start(snpHardware(chain, measurement, randomBytes(48)));
    const r = await sigilVerify(['--url', service.url, '--api-key', TEST_API_KEY], chain.roots);
    expect(r.code).toBe(1);
    expect(failing(r.stdout)).toEqual(['attestation.measurement']);
  });

  it('fails measurement checks when the user expects other code', async () => {
    const service = await start(snpHardware(chain, measurement));
    const r = await sigilVerify(['--url', service.url, '--api-key', TEST_API_KEY, '--measurement', 'ab'.repeat(48)], chain.roots);
    expect(r.code).toBe(1);
    expect(failing(r.stdout)).toEqual(['attestation.measurement', 'receipt.measurement']);
  });

  it('verifies a kept receipt offline against the saved start evidence', async () => {
    const service = await start(snpHardware(chain, measurement));
    const live = await sigilVerify(['--url', service.url, '--api-key', TEST_API_KEY, '--json', '--allow-unpinned-code'], chain.roots);
    expect(JSON.parse(live.stdout).ok).toBe(true);
    const dir = mkdtempSync(join(tmpdir(), 'sigil-hw-'));
    const save = (name: string, data: string | Uint8Array) => {
      writeFileSync(join(dir, name), data);
      return join(dir, name);
    };
    const args = [
      save('receipt.jws', service.last!.receipt),
      '--jwks',
      save('jwks.json', await text(`${service.url}/v1/verify/jwks.json`)),
      '--attestation',
      save('start.json', await text(`${service.url}/v1/verify/attestation`)),
      '--policy',
      save('policy.json', await text(`${service.url}/v1/verify/policy`)),
      '--nonce',
      JSON.parse(Buffer.from(service.last!.receipt.split('.')[1]!, 'base64url').toString()).nonce,
      '--request',
      save('req', service.last!.requestBytes),
      '--response',
      save('res', service.last!.responseBytes),
      '--measurement',
      measurement.toString('hex'),
      '--allow-unpinned-code',
    ];
    const r = await sigilVerify(args, chain.roots);
    expect(failing(r.stdout)).toEqual([]);
    expect(status(r.stdout)).toContain('PASS receipt.attestation_hash');
    expect(r.code).toBe(0);
  });
});

describe('sigil verify against a service with a TDX quote (test Intel chain)', () => {
  let chain: IntelTestChain;
  let service: FakeService;
  const mrTd = randomBytes(48);

  beforeAll(async () => {
    chain = await createIntelTestChain();
    service = await startFakeService(await makeSigner(), tdxHardware(chain, mrTd));
  });
  afterAll(async () => service.close());

  it('passes every check, the quote ones included', async () => {
    const r = await sigilVerify(['--url', service.url, '--api-key', TEST_API_KEY, '--stream', '--allow-unpinned-code'], chain.roots);
    expect(failing(r.stdout)).toEqual([]);
    const lines = status(r.stdout);
    for (const name of [
      'tdx.quote_signature',
      'tdx.qe_report_signature',
      'tdx.qe_binding',
      'tdx.pck_chain',
      'attestation.report_data',
      'receipt.attestation_hash',
      'model_receipt.attestation_hash',
    ]) {
      expect(lines).toContain(`PASS ${name}`);
    }
    expect(lines).toContain('WAIVED attestation.measurement');
    expect(r.code).toBe(0);
  });

  it('fails when the quote chains to another Intel root', async () => {
    const foreign = await createIntelTestChain();
    const r = await sigilVerify(['--url', service.url, '--api-key', TEST_API_KEY], foreign.roots);
    expect(r.code).toBe(1);
    expect(failing(r.stdout)).toEqual(['tdx.root']);
  });

  it("takes reference values and Intel collateral: a pinned MRTD passes, a test chain fails against Intel's real collateral", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-verify-ref-'));
    const reference = join(dir, 'reference.yaml');
    writeFileSync(reference, `tdx:\n  mrtd: ${mrTd.toString('hex')}\n  tcb_status: UpToDate\n`);
    const r = await sigilVerify(
      ['--url', service.url, '--api-key', TEST_API_KEY, '--reference', reference, '--collateral', new URL('../vectors/tdx/', import.meta.url).pathname],
      chain.roots,
    );
    expect(r.code).toBe(1);
    expect(status(r.stdout)).toContain('PASS reference.mrtd');
    expect(r.stdout).toMatch(/^---- reference\.rtmr0 — NOT PINNED: RTMR0 0{96} /m);
    // The vectors folder is not a bundle (its files keep Intel's names), so each collateral check names its missing file; the test PCK has no SGX extension.
    expect(failing(r.stdout)).toEqual([
      'tdx.tcb_status',
      'collateral.pck_certificate',
      'collateral.root_crl',
      'collateral.tcb_signing_chain',
      'collateral.tcb_info',
      'collateral.qe_identity',
      'collateral.pck_crl',
    ]);
    const missing = await sigilVerify(['--url', service.url, '--api-key', TEST_API_KEY, '--collateral', join(dir, 'absent')], chain.roots);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toBe(`sigil verify: could not verify: cannot read the collateral bundle ${join(dir, 'absent')}: ENOENT\n`);
  });
});
