import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TrustRoots } from '../../src/verify/attestation.ts';
import { buildSnpReport, createAmdTestChain, createIntelTestChain } from '../support/evidence-fixtures.ts';
import type { AmdTestChain, IntelTestChain } from '../support/evidence-fixtures.ts';
import { startSnpSigil, startTdxSigil, type TeeSigil } from '../support/tee-sigil.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { runSigilVerify } from '../support/cli.ts';

const sigilVerify = (argv: string[], roots?: TrustRoots) => runSigilVerify(argv, roots === undefined ? {} : { roots });

/** The service's documents, fetched as an auditor saving them would (its self-signed TLS key is what the evidence binds). */
const insecure = new Agent({ connect: { rejectUnauthorized: false } });
const text = async (url: string) => (await request(url, { dispatcher: insecure })).body.text();

const status = (stdout: string) => [...stdout.matchAll(/^(PASS|FAIL|WAIVED|----) (\S+) — /gm)].map((m) => `${m[1]} ${m[2]}`);
const failing = (stdout: string) => [...stdout.matchAll(/^FAIL (\S+) — /gm)].map((m) => m[1]);

let engine: TestEngine;
const started: TeeSigil[] = [];
beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m1'] });
});
afterAll(async () => {
  await Promise.all(started.map((s) => s.close(0)));
  await engine.close();
  await insecure.close();
});
const keep = (sigil: TeeSigil) => {
  started.push(sigil);
  return sigil;
};

describe('sigil verify against a service with SEV-SNP evidence (test AMD chain)', () => {
  let chain: AmdTestChain;
  let sigil: TeeSigil;
  const measurement = randomBytes(48);

  beforeAll(async () => {
    chain = await createAmdTestChain();
    sigil = keep(await startSnpSigil({ engineUrl: engine.baseUrl, chain, measurement }));
  });

  it('passes every check, the hardware ones included, for a JSON and a streamed completion', async () => {
    const r = await sigilVerify(['--url', sigil.url, '--api-key', sigil.key, '--allow-unpinned-code'], chain.roots);
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
      ['--url', sigil.url, '--api-key', sigil.key, '--stream', '--measurement', measurement.toString('hex'), '--allow-unpinned-code'],
      chain.roots,
    );
    expect(failing(streamed.stdout)).toEqual([]);
    expect(streamed.code).toBe(0);
  });

  it('fails the chain against the real AMD roots: a test chain proves nothing', async () => {
    const r = await sigilVerify(['--url', sigil.url, '--api-key', sigil.key]);
    expect(r.code).toBe(1);
    expect(failing(r.stdout)).toEqual(['snp.root', 'snp.crl']);
    expect(r.stdout).toMatch(/^FAIL snp\.root — the chain ends at ARK-Test \(SHA-256 [0-9A-F:]+\), which is not a trusted AMD root$/m);
  });

  it("takes AMD's CRL from --collateral DIR when the certificate table carries none, as the attested client's collateral option does", async () => {
    const bare = keep(await startSnpSigil({ engineUrl: engine.baseUrl, chain, measurement, withoutCrl: true }));
    const without = await sigilVerify(['--url', bare.url, '--api-key', bare.key, '--allow-unpinned-code'], chain.roots);
    expect(failing(without.stdout)).toEqual(['snp.crl']);
    expect(without.code).toBe(1);
    const dir = mkdtempSync(join(tmpdir(), 'sigil-hw-collateral-'));
    writeFileSync(join(dir, 'amd-crl.der'), new Uint8Array(chain.crl.rawData));
    const withBundle = await sigilVerify(['--url', bare.url, '--api-key', bare.key, '--allow-unpinned-code', '--collateral', dir], chain.roots);
    expect(failing(withBundle.stdout)).toEqual([]);
    expect(withBundle.stdout).toMatch(
      /^PASS snp\.crl — SEV-Test \(serial 02\) is not among the 0 certificate\(s\) ARK-Test revoked \(CRL from the collateral bundle \(amd-crl\.der\)/m,
    );
    expect(withBundle.code).toBe(0);
  });

  it('fails receipt.measurement when the hardware measures other code now than the code the receipts name', async () => {
    const other = randomBytes(48);
    // The stand-in hardware measures `measurement` for the start evidence, whose measurement Sigil's receipts name, and other code in every fresh report.
    const changed = keep(
      await startSnpSigil({
        engineUrl: engine.baseUrl,
        chain,
        measurement,
        report: (reportData, call) => buildSnpReport({ reportData, measurement: call === 0 ? measurement : other }, chain.vcekKey),
      }),
    );
    const r = await sigilVerify(['--url', changed.url, '--api-key', changed.key], chain.roots);
    expect(r.code).toBe(1);
    expect(failing(r.stdout)).toEqual(['receipt.measurement']);
    expect(r.stdout).toContain(`FAIL receipt.measurement — enclave_measurement is ${measurement.toString('hex')}; expected ${other.toString('hex')}\n`);
  });

  it('fails measurement checks when the user expects other code', async () => {
    const r = await sigilVerify(['--url', sigil.url, '--api-key', sigil.key, '--measurement', 'ab'.repeat(48)], chain.roots);
    expect(r.code).toBe(1);
    expect(failing(r.stdout)).toEqual(['attestation.measurement', 'receipt.measurement']);
  });

  it('verifies a kept receipt offline against the saved start evidence', async () => {
    const nonce = 'kept-nonce-7';
    const requestBytes = '{"model":"m1","messages":[{"role":"user","content":"hi"}]}';
    const answer = await request(`${sigil.url}/v1/chat/completions`, {
      method: 'POST',
      dispatcher: insecure,
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-service-receipt': 'true', 'x-service-nonce': nonce },
      body: requestBytes,
    });
    expect(answer.statusCode).toBe(200);
    const responseBytes = Buffer.from(await answer.body.arrayBuffer());
    const dir = mkdtempSync(join(tmpdir(), 'sigil-hw-'));
    const save = (name: string, data: string | Uint8Array) => {
      writeFileSync(join(dir, name), data);
      return join(dir, name);
    };
    const args = [
      save('receipt.jws', String(answer.headers['x-service-receipt'])),
      '--jwks',
      save('jwks.json', await text(`${sigil.url}/v1/verify/jwks.json`)),
      '--attestation',
      save('start.json', await text(`${sigil.url}/v1/verify/attestation`)),
      '--policy',
      save('policy.json', await text(`${sigil.url}/v1/verify/policy`)),
      '--nonce',
      nonce,
      '--request',
      save('req', requestBytes),
      '--response',
      save('res', responseBytes),
      '--measurement',
      measurement.toString('hex'),
      '--allow-unpinned-code',
    ];
    const r = await sigilVerify(args, chain.roots);
    expect(failing(r.stdout)).toEqual([]);
    expect(status(r.stdout)).toContain('PASS receipt.attestation_hash');
    // Sigil seals bodies by default: a saved document's HPKE key, like its TLS key, was served over no connection this run made.
    expect(r.stdout).toContain(
      'WAIVED attestation.hpke_key — not checked: the document was read from a file, not fetched from the service now, so no served HPKE key could be compared with the attested one (waived: offline: --attestation FILE was saved earlier, so no connection was made to compare its TLS key or HPKE key)\n',
    );
    expect(r.code).toBe(0);
  });
});

describe('sigil verify against a service with a TDX quote (test Intel chain)', () => {
  let chain: IntelTestChain;
  let sigil: TeeSigil;
  const mrTd = randomBytes(48);

  beforeAll(async () => {
    chain = await createIntelTestChain();
    sigil = keep(await startTdxSigil({ engineUrl: engine.baseUrl, chain, mrTd }));
  });

  it('passes every check, the quote ones included', async () => {
    const r = await sigilVerify(['--url', sigil.url, '--api-key', sigil.key, '--stream', '--allow-unpinned-code'], chain.roots);
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
    const r = await sigilVerify(['--url', sigil.url, '--api-key', sigil.key], foreign.roots);
    expect(r.code).toBe(1);
    expect(failing(r.stdout)).toEqual(['tdx.root']);
  });

  it("takes reference values and Intel collateral: a pinned MRTD passes, a test chain fails against Intel's real collateral", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-verify-ref-'));
    const reference = join(dir, 'reference.yaml');
    writeFileSync(reference, `tdx:\n  mrtd: ${mrTd.toString('hex')}\n  tcb_status: UpToDate\n`);
    const r = await sigilVerify(
      ['--url', sigil.url, '--api-key', sigil.key, '--reference', reference, '--collateral', new URL('../vectors/tdx/', import.meta.url).pathname],
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
    const missing = await sigilVerify(['--url', sigil.url, '--api-key', sigil.key, '--collateral', join(dir, 'absent')], chain.roots);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toBe(`sigil verify: could not verify: cannot read the collateral bundle ${join(dir, 'absent')}: ENOENT\n`);
  });
});
