import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { keyedSnpRelease, releaseFlags } from '../release/release-fixtures.ts';
import { runVerifyEvidence } from '../support/cli.ts';

const vectors = new URL('../vectors/', import.meta.url).pathname;
const v = (path: string) => join(vectors, path);
const work = mkdtempSync(join(tmpdir(), 'sigil-verify-evidence-release-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const file = (name: string, content: string | Uint8Array) => {
  writeFileSync(join(work, name), content);
  return join(work, name);
};

// dstack's Milan attestation (real evidence): the 1184-byte report starts at byte 4.
const milan = file('milan-report.bin', readFileSync(v('snp/dstack-milan-attestation.bin')).subarray(4, 4 + 1184));
const MILAN_MEASUREMENT = '7f51e17f72a04d5422cb2c00998166536019a217376f3aa45a630e59c805a599847ff250dbffcd07e1ba639771d6f05d';
const AT = new Date('2026-07-01T00:00:00Z');
const DAY = 86_400_000;
const evidence = [
  '--snp-report',
  milan,
  '--vcek',
  v('snp/dstack-milan-vcek.pem'),
  '--ask',
  v('snp/dstack-milan-ask.pem'),
  '--allow-unbound-evidence',
  '--allow-unpinned-code',
];

const release = (name: string, measurement: string, expires: Date, tamper?: string, version?: string): string[] =>
  releaseFlags(keyedSnpRelease(measurement, expires, { tamperedTo: tamper, ...(version === undefined ? {} : { version }) }), name, file);

const failing = (stdout: string) => [...stdout.matchAll(/^FAIL (\S+) — /gm)].map((m) => m[1]);

describe('sigil verify-evidence --release on real SEV-SNP evidence', () => {
  it("pins dstack's Milan MEASUREMENT with a release that lists it", async () => {
    const r = await runVerifyEvidence([...evidence, ...release('good', MILAN_MEASUREMENT, new Date(AT.getTime() + DAY))], AT);
    expect(failing(r.stdout)).toEqual(['snp.crl']); // no AMD CRL is current while this VCEK is valid
    expect(r.marks).toMatchObject({
      'release.bundle': 'PASS',
      'release.signer': 'PASS',
      'release.tlog': 'WAIVED',
      'release.signature': 'PASS',
      'release.identity': 'PASS',
      'release.statement': 'PASS',
      'release.expiry': 'PASS',
      'reference.values': 'PASS',
      'reference.measurement': 'PASS',
    });
    expect(r.stdout).toContain('PASS release.expiry — the manifest is valid until 2026-07-02T00:00:00.000Z (now 2026-07-01T00:00:00.000Z)\n');
    expect(r.code).toBe(1); // snp.crl alone
  });

  it('fails release.expiry for a release that expired before --at', async () => {
    const r = await runVerifyEvidence([...evidence, ...release('expired', MILAN_MEASUREMENT, new Date(AT.getTime() - DAY))], AT);
    expect(failing(r.stdout)).toEqual(['release.expiry', 'snp.crl']);
    expect(r.stdout).toContain('FAIL release.expiry — the manifest expired at 2026-06-30T00:00:00.000Z (now 2026-07-01T00:00:00.000Z)');
    expect(r.code).toBe(1);
  });

  it('fails release.signature for a release whose values were changed after signing', async () => {
    const r = await runVerifyEvidence([...evidence, ...release('tampered', '00'.repeat(48), new Date(AT.getTime() + DAY), MILAN_MEASUREMENT)], AT);
    expect(failing(r.stdout)).toEqual(['release.signature', 'release.identity', 'release.statement', 'release.expiry', 'release.validity', 'snp.crl']);
    expect(r.code).toBe(1);
  });

  it('fails reference.measurement for a release of other code', async () => {
    const r = await runVerifyEvidence([...evidence, ...release('other', '00'.repeat(48), new Date(AT.getTime() + DAY))], AT);
    expect(failing(r.stdout)).toEqual(['snp.crl', 'reference.measurement']);
    expect(r.code).toBe(1);
  });

  it('adds --reference values the release does not state (HOST_DATA, a machine allow-list), and refuses one it states', async () => {
    const platform = file(
      'platform.yaml',
      'snp:\n  host_data: 783f0057820acb99249af56cc3b07b4e8d80f65183167cba9cf437bb680f742f\n  chip_id: ' + '00'.repeat(64) + '\n',
    );
    const both = await runVerifyEvidence([...evidence, ...release('both', MILAN_MEASUREMENT, new Date(AT.getTime() + DAY)), '--reference', platform], AT);
    expect(both.marks).toMatchObject({ 'reference.measurement': 'PASS', 'reference.host_data': 'PASS', 'snp.instance': 'FAIL' });
    expect(failing(both.stdout)).toEqual(['snp.crl', 'snp.instance']); // snp.crl: no current AMD CRL for this real Milan report
    expect(both.code).toBe(1);
    const overlap = await runVerifyEvidence(
      [
        ...evidence,
        ...release('overlap', MILAN_MEASUREMENT, new Date(AT.getTime() + DAY)),
        '--reference',
        file('overlap.yaml', `snp:\n  measurement: ${MILAN_MEASUREMENT}\n`),
      ],
      AT,
    );
    expect(overlap.stderr).toContain(
      'snp.measurement: is stated by the release manifest: next to a release, reference values may only add what a release does not state (machine allow-lists, TCB floors, policy)\n',
    );
    expect(overlap.code).toBe(3);
  });

  it("refuses an older release that expires later when the reference values' release section requires a newer one", async () => {
    const requires = file('requires.yaml', 'release:\n  min_version: 0.2.0\n  max_validity_days: 30\n');
    const older = await runVerifyEvidence(
      [...evidence, ...release('older', MILAN_MEASUREMENT, new Date(AT.getTime() + 20 * DAY), undefined, '0.1.0'), '--reference', requires],
      AT,
    );
    expect(failing(older.stdout)).toEqual(['release.version', 'snp.crl']);
    expect(older.stdout).toContain(
      'FAIL release.version — the manifest is for release 0.1.0, older than 0.2.0, the oldest your reference values accept (release.min_version)',
    );
    // Its values were not used: the code is compared with nothing.
    expect(older.marks['reference.measurement']).not.toBe('PASS');
    const current = await runVerifyEvidence(
      [...evidence, ...release('current', MILAN_MEASUREMENT, new Date(AT.getTime() + 2 * DAY), undefined, '0.2.0'), '--reference', requires],
      AT,
    );
    expect(current.marks).toMatchObject({ 'release.version': 'PASS', 'release.validity': 'PASS', 'reference.measurement': 'PASS' });
    expect(failing(current.stdout)).toEqual(['snp.crl']);
  });

  it('refuses a release valid for longer than the 30 days a release workflow signs for', async () => {
    const r = await runVerifyEvidence([...evidence, ...release('century', MILAN_MEASUREMENT, new Date('2126-07-01T00:00:00Z'))], AT);
    expect(failing(r.stdout)).toEqual(['release.validity', 'snp.crl']);
    expect(r.stdout).toMatch(/^FAIL release\.validity — the manifest stays valid for 36524 days from now /m);
  });

  it('refuses a signer option without --release', async () => {
    const orphan = await runVerifyEvidence([...evidence, '--identity', 'x', '--issuer', 'y'], AT);
    expect(orphan.code).toBe(2);
    expect(orphan.stderr).toMatch(/^sigil verify-evidence: --identity, --issuer name the signer of a release manifest: give --release FILE too\n/);
  });
});
