import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifySnpEvidence } from '../../../src/verify/evidence/snp-verify.ts';
import { amdCertTable, amdTestCrl, buildSnpReport, createAmdTestChain, type AmdTestChain } from '../../support/evidence-fixtures.ts';
import { runVerifyEvidence } from '../../support/cli.ts';

const v = (path: string) => new URL(`../../vectors/snp/${path}`, import.meta.url).pathname;
const work = mkdtempSync(join(tmpdir(), 'sigil-amd-crl-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A bundle directory holding `crl` as amd-crl.der. */
function bundle(name: string, crl: Uint8Array): string {
  const dir = join(work, name);
  mkdirSync(dir);
  writeFileSync(join(dir, 'amd-crl.der'), crl);
  return dir;
}
const der = (pemFile: string) => new Uint8Array(new x509.X509Crl(readFileSync(v(pemFile), 'utf8')).rawData);

// Azure's Genoa report and VCEK (valid from 2025-06-11) with AMD's Genoa CRL (2024-10-23 to 2025-11-03).
const GENOA_AT = new Date('2025-07-01T00:00:00Z');
const GENOA = ['--snp-report', v('openpcc-azure-genoa-report.bin'), '--vcek', v('openpcc-genoa-vcek.pem')];
// go-sev-guest's Milan report and VCEK (2022-2029) with AMD's Milan CRL (2025-05-06 to 2026-05-12).
const MILAN_AT = new Date('2025-06-01T00:00:00Z');
const MILAN = ['--snp-report', v('go-sev-guest-debug-report.bin'), '--vcek', v('go-sev-guest-debug-vcek.der')];

describe("AMD's real CRLs, checked against the built-in ARKs", () => {
  it('a real Genoa report passes snp.crl with the Genoa CRL: it is signed by ARK-Genoa and does not list SEV-Genoa', async () => {
    const r = await runVerifyEvidence([...GENOA, '--collateral', bundle('genoa', der('openpcc-amd-genoa-crl.pem'))], GENOA_AT);
    expect(r.stderr).toBe('');
    expect(r.marks).toMatchObject({ 'snp.report_signature': 'PASS', 'snp.vcek_chain': 'PASS', 'snp.root': 'PASS', 'snp.crl': 'PASS' });
    expect(r.stdout).toContain(
      'PASS snp.crl — SEV-Genoa (serial 020002) is not among the 1 certificate(s) ARK-Genoa revoked (CRL from the collateral bundle (amd-crl.der), signed by ARK-Genoa, current at 2025-07-01T00:00:00.000Z, next update 2025-11-03T01:00:00.000Z)',
    );
  });

  it('a real Milan report passes snp.crl with the Milan CRL (PEM accepted too)', async () => {
    const dir = join(work, 'milan-pem');
    mkdirSync(dir);
    copyFileSync(v('openpcc-amd-milan-crl.pem'), join(dir, 'amd-crl.der'));
    const r = await runVerifyEvidence([...MILAN, '--collateral', dir], MILAN_AT);
    expect(r.marks['snp.crl']).toBe('PASS');
    expect(r.stdout).toContain('is not among the 0 certificate(s) ARK-Milan revoked');
  });

  it('one changed byte of the CRL fails snp.crl: its signature no longer verifies', async () => {
    const crl = der('openpcc-amd-milan-crl.pem');
    crl[crl.length - 10]! ^= 0x01;
    const r = await runVerifyEvidence([...MILAN, '--collateral', bundle('milan-tampered', crl)], MILAN_AT);
    expect(r.marks).toMatchObject({ 'snp.vcek_chain': 'PASS', 'snp.root': 'PASS', 'snp.crl': 'FAIL' });
    expect(r.stdout).toContain(
      'FAIL snp.crl — the AMD CRL from the collateral bundle (amd-crl.der) (issuer OU=Engineering, C=US, L=Santa Clara, ST=CA, O=Advanced Micro Devices, CN=ARK-Milan) is not signed by ARK-Milan',
    );
  });

  it("another product's CRL fails snp.crl", async () => {
    const r = await runVerifyEvidence([...MILAN, '--collateral', bundle('milan-with-genoa', der('openpcc-amd-genoa-crl.pem'))], MILAN_AT);
    expect(r.marks['snp.crl']).toBe('FAIL');
    expect(r.stdout).toContain('CN=ARK-Genoa) is not signed by ARK-Milan');
  });

  it('a CRL past its next update fails snp.crl', async () => {
    const r = await runVerifyEvidence([...GENOA, '--collateral', bundle('genoa-stale', der('openpcc-amd-genoa-crl.pem'))], new Date('2025-12-01T00:00:00Z'));
    expect(r.marks['snp.crl']).toBe('FAIL');
    expect(r.stdout).toContain(
      'FAIL snp.crl — the AMD CRL is valid 2024-10-23T04:36:24.000Z to 2025-11-03T01:00:00.000Z, not at 2025-12-01T00:00:00.000Z: fetch a current one',
    );
  });

  it('no CRL fails snp.crl, and snp.allow_missing_crl makes it WAIVED', async () => {
    const strict = await runVerifyEvidence(GENOA, GENOA_AT);
    expect(strict.marks['snp.crl']).toBe('FAIL');
    expect(strict.stdout).toContain('FAIL snp.crl — not checked: no AMD CRL was given');
    const reference = join(work, 'allow-missing-crl.yaml');
    writeFileSync(reference, 'snp:\n  allow_missing_crl: true\n');
    const waived = await runVerifyEvidence([...GENOA, '--reference', reference], GENOA_AT);
    expect(waived.marks['snp.crl']).toBe('WAIVED');
    expect(waived.stdout).toContain('snp.allow_missing_crl');
  });
});

describe('revocation, with a test ARK', () => {
  let chain: AmdTestChain;
  const measurement = new Uint8Array(48).fill(7);
  const at = new Date('2025-01-01T00:00:00Z');
  beforeAll(async () => {
    chain = await createAmdTestChain();
  });
  const check = (table: Uint8Array, crl?: Uint8Array) =>
    verifySnpEvidence(
      buildSnpReport({ reportData: new Uint8Array(64), measurement }, chain.vcekKey),
      table,
      chain.roots,
      at,
      undefined,
      crl === undefined ? {} : { crl },
    ).checks.find((c) => c.name === 'snp.crl');

  it("the certificate table's CRL entry is used when the bundle has none, and passes when it revokes nothing", () => {
    expect(check(amdCertTable(chain))).toMatchObject({ ok: true });
    expect(check(amdCertTable(chain))?.detail).toContain("CRL from the certificate table's CRL entry");
  });

  it('an ASK the ARK revoked fails snp.crl, from the bundle or from the certificate table', async () => {
    const revoking = await amdTestCrl(chain, [chain.ask.serialNumber]);
    const fromBundle = check(amdCertTable({ ...chain, crl: undefined }), new Uint8Array(revoking.rawData));
    expect(fromBundle).toEqual({
      name: 'snp.crl',
      ok: false,
      detail: 'ARK-Test revoked SEV-Test (serial 02) on 2024-06-01T00:00:00.000Z: keys it certified cannot be trusted',
    });
    expect(check(amdCertTable({ ...chain, crl: revoking }))?.ok).toBe(false);
  });

  it('a CRL revoking another serial passes', async () => {
    const other = await amdTestCrl(chain, ['7f']);
    expect(check(amdCertTable(chain), new Uint8Array(other.rawData))?.detail).toContain('is not among the 1 certificate(s) ARK-Test revoked');
  });
});
