import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAmdTestChain, SNP_PLATFORM_VALUES_YAML } from '../support/evidence-fixtures.ts';
import type { AmdTestChain } from '../support/evidence-fixtures.ts';
import { keyedSnpRelease, releaseFlags } from '../release/release-fixtures.ts';
import { startSnpSigil, type TeeSigil } from '../support/tee-sigil.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { runSigilVerify } from '../support/cli.ts';

const DAY = 86_400_000;
const dir = mkdtempSync(join(tmpdir(), 'sigil-verify-release-'));
const save = (name: string, data: string) => {
  writeFileSync(join(dir, name), data);
  return join(dir, name);
};
const status = (stdout: string) => [...stdout.matchAll(/^(PASS|FAIL|WAIVED|----) (\S+) — /gm)].map((m) => `${m[1]} ${m[2]}`);
const failing = (stdout: string) => [...stdout.matchAll(/^FAIL (\S+) — /gm)].map((m) => m[1]);
/** The service's self-signed TLS key is what the evidence binds; an auditor saving its JWKS fetches it as is. */
const insecure = new Agent({ connect: { rejectUnauthorized: false } });

let engine: TestEngine;
beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m1'] });
});
afterAll(async () => {
  await engine.close();
  await insecure.close();
});

describe('sigil verify --release: a signed release manifest as the reference values', () => {
  let chain: AmdTestChain;
  let service: TeeSigil;
  const measurement = randomBytes(48);

  const sigilVerify = (argv: string[]) => runSigilVerify(argv, { roots: chain.roots });

  const release = (name: string, values: string, expires: Date, tamper?: string, selfMeasurement = service.manifest): string[] =>
    releaseFlags(keyedSnpRelease(values, expires, { selfMeasurement, tamperedTo: tamper }), name, save);

  beforeAll(async () => {
    chain = await createAmdTestChain();
    service = await startSnpSigil({ engineUrl: engine.baseUrl, chain, measurement });
  });
  afterAll(async () => service.close(0));

  it('verifies a service whose measurement the release lists, printing the release checks with the others', async () => {
    // The platform values a release does not list (TCB minimums, policy bits...) stay not pinned: waived here.
    const r = await sigilVerify([
      '--url',
      service.url,
      '--api-key',
      service.key,
      '--allow-unpinned-code',
      ...release('good', measurement.toString('hex'), new Date(Date.now() + DAY)),
    ]);
    expect(failing(r.stdout)).toEqual([]);
    const lines = status(r.stdout);
    for (const name of [
      'release.bundle',
      'release.signer',
      'release.signature',
      'release.identity',
      'release.statement',
      'release.expiry',
      'release.validity',
      'reference.values',
      'reference.measurement',
      'attestation.manifest',
    ]) {
      expect(lines).toContain(`PASS ${name}`);
    }
    expect(r.stdout).toMatch(
      /^WAIVED release\.tlog — a locally keyed manifest is not in a transparency log, .* \(waived: the signer's key is pinned \(--key\): the auditor trusts its holder without a transparency log\)$/m,
    );
    const hex = measurement.toString('hex');
    expect(r.stdout).toContain(`PASS reference.measurement — MEASUREMENT ${hex.slice(0, 16)}...${hex.slice(-8)} equals accepted reference value 1 of 1:`);
    expect(r.stdout).toContain(`PASS attestation.manifest — manifest ${service.manifest} is one the reference values accept:`);
    expect(r.stdout).toMatch(/^verified with waivers: 50 checks passed; 13 waived \(release\.tlog, snp\.smt, /m);
    expect(r.code).toBe(0);
  });

  it('fails release.expiry for an expired release, and compares nothing with its values', async () => {
    const r = await sigilVerify([
      '--url',
      service.url,
      '--api-key',
      service.key,
      ...release('expired', measurement.toString('hex'), new Date(Date.now() - DAY)),
    ]);
    expect(failing(r.stdout)).toEqual(['release.expiry']);
    expect(r.stdout).toMatch(/^FAIL release\.expiry — the manifest expired at /m);
    expect(r.stdout).toMatch(/^---- reference\.values — NOT PINNED: no reference values given/m);
    expect(r.stdout).toMatch(/^NOT VERIFIED: 1 of \d+ checks failed/m);
    expect(r.code).toBe(1);
  });

  it("fails release.signature for a release changed after signing, even when the change names the service's measurement", async () => {
    const r = await sigilVerify([
      '--url',
      service.url,
      '--api-key',
      service.key,
      ...release('tampered', 'ab'.repeat(48), new Date(Date.now() + DAY), measurement.toString('hex')),
    ]);
    expect(failing(r.stdout)).toEqual(['release.signature', 'release.identity', 'release.statement', 'release.expiry', 'release.validity']);
    expect(r.stdout).toMatch(/^FAIL release\.signature — the signature does not match the manifest: it was altered after signing, or signed by another key/m);
    expect(r.code).toBe(1);
  });

  it('fails reference.measurement when the release lists other code than the service runs', async () => {
    const other = 'ab'.repeat(48);
    const r = await sigilVerify(['--url', service.url, '--api-key', service.key, ...release('other', other, new Date(Date.now() + DAY))]);
    expect(failing(r.stdout)).toEqual(['reference.measurement']);
    expect(r.stdout).toContain(`is none of the 1 accepted reference value(s)`);
    expect(r.code).toBe(1);
  });

  it("fails attestation.manifest when the service's code is not the release's self-measurement, though its launch measurement is listed", async () => {
    const released = 'ab'.repeat(48);
    const r = await sigilVerify([
      '--url',
      service.url,
      '--api-key',
      service.key,
      '--allow-unpinned-code',
      ...release('other-code', measurement.toString('hex'), new Date(Date.now() + DAY), undefined, released),
    ]);
    expect(failing(r.stdout)).toEqual(['attestation.manifest']);
    expect(r.stdout).toContain(
      `FAIL attestation.manifest — manifest ${service.manifest} is not among the reference values' ${released}: something that decides behaviour differs from the audited build or configuration`,
    );
    expect(r.stdout).toMatch(/^NOT VERIFIED: 1 of \d+ checks failed/m);
    expect(r.code).toBe(1);
  });

  it('checks the release of a kept receipt verified without evidence: a tampered one still fails the verdict', async () => {
    const answer = await request(`${service.url}/v1/chat/completions`, {
      method: 'POST',
      dispatcher: insecure,
      headers: { authorization: `Bearer ${service.key}`, 'content-type': 'application/json', 'x-service-receipt': 'true' },
      body: '{"model":"m1","messages":[{"role":"user","content":"hi"}]}',
    });
    await answer.body.arrayBuffer();
    const jwks = await (await request(`${service.url}/v1/verify/jwks.json`, { dispatcher: insecure })).body.text();
    const args = [save('kept.jws', String(answer.headers['x-service-receipt'])), '--jwks', save('kept-jwks.json', jwks)];
    const r = await sigilVerify([...args, ...release('kept', 'ab'.repeat(48), new Date(Date.now() + DAY), measurement.toString('hex'))]);
    expect(failing(r.stdout)).toEqual(expect.arrayContaining(['attestation.document', 'release.signature']));
    expect(r.stdout).toMatch(/^FAIL release\.signature — the signature does not match the manifest/m);
    expect(r.code).toBe(1);
  });

  it('refuses --release without a signer, and a signer without --release, as bad usage', async () => {
    const [, bundle] = release('usage', measurement.toString('hex'), new Date(Date.now() + DAY));
    const unnamed = await sigilVerify(['--url', service.url, '--api-key', service.key, '--release', bundle!]);
    expect(unnamed.code).toBe(2);
    expect(unnamed.stderr).toContain(
      'sigil verify: --release needs --key PUB.pem, or both --identity and --issuer: a manifest from an unnamed signer proves nothing',
    );
    const orphan = await sigilVerify(['--url', service.url, '--api-key', service.key, '--key', bundle!]);
    expect(orphan.code).toBe(2);
    expect(orphan.stderr).toContain('--key name the signer of a release manifest: give --release FILE too');
  });
});

describe('sigil verify --release with --reference for what a release does not state', () => {
  let chain: AmdTestChain;
  let service: TeeSigil;
  const measurement = randomBytes(48);

  const sigilVerify = (argv: string[]) => runSigilVerify(argv, { roots: chain.roots });

  const release = (name: string) =>
    releaseFlags(keyedSnpRelease(measurement.toString('hex'), new Date(Date.now() + DAY), { selfMeasurement: service.manifest }), name, save);

  beforeAll(async () => {
    chain = await createAmdTestChain('Milan');
    service = await startSnpSigil({ engineUrl: engine.baseUrl, chain, measurement, milan: true });
  });
  afterAll(async () => service.close(0));

  it('verifies a keyed release on SEV-SNP without --allow-unpinned-code: the release pins the code, the file the platform', async () => {
    const r = await sigilVerify([
      '--url',
      service.url,
      '--api-key',
      service.key,
      ...release('pinned'),
      '--reference',
      save('platform.yaml', SNP_PLATFORM_VALUES_YAML),
    ]);
    expect(status(r.stdout).filter((s) => !s.startsWith('PASS'))).toEqual(['WAIVED release.tlog']);
    expect(status(r.stdout)).toEqual(
      expect.arrayContaining(['PASS reference.measurement', 'PASS attestation.manifest', 'PASS snp.instance', 'PASS snp.product', 'PASS reference.host_data']),
    );
    expect(r.stdout).toMatch(/^verified with waivers: \d+ checks passed; 1 waived \(release\.tlog\)$/m);
    expect(r.code).toBe(0);
  });

  it('fails snp.instance when the machine is not on the allow-list the file adds', async () => {
    const other = SNP_PLATFORM_VALUES_YAML.replace('c1'.repeat(64), 'c2'.repeat(64));
    const r = await sigilVerify(['--url', service.url, '--api-key', service.key, ...release('machines'), '--reference', save('machines.yaml', other)]);
    expect(failing(r.stdout)).toEqual(['snp.instance']);
    expect(r.code).toBe(1);
  });

  it('refuses a file that pins what the release states, naming the key', async () => {
    const r = await sigilVerify([
      '--url',
      service.url,
      '--api-key',
      service.key,
      ...release('overlap'),
      '--reference',
      save('overlap.yaml', `snp:\n  measurement: ${'ab'.repeat(48)}\n`),
    ]);
    expect(r.stderr).toContain(
      'snp.measurement: is stated by the release manifest: next to a release, reference values may only add what a release does not state (machine allow-lists, TCB floors, policy)',
    );
    expect(r.code).toBe(3);
  });
});
