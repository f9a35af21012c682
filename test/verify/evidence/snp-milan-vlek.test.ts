import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ARK_MILAN, ASVK_MILAN } from '../../../src/verify/evidence/roots/amd-milan.ts';
import { runVerifyEvidence } from '../../support/cli.ts';

const v = (path: string) => new URL(`../../vectors/snp/${path}`, import.meta.url).pathname;
const work = mkdtempSync(join(tmpdir(), 'sigil-milan-vlek-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
// The VLEK is valid from 2024-12-10 to 2025-12-10.
const AT = new Date('2025-06-01T00:00:00Z');
const REPORT = v('trustee-milan-vlek-report.bin');
const VLEK = v('trustee-milan-vlek.der');

describe('a real Milan report signed by a VLEK', () => {
  it('verifies against the built-in Milan ASVK and ARK', async () => {
    const r = await runVerifyEvidence(['--snp-report', REPORT, '--vcek', VLEK], AT);
    expect(r.stderr).toBe('');
    expect(r.marks).toMatchObject({
      'snp.report': 'PASS',
      'snp.cert_table': 'PASS',
      'snp.report_signature': 'PASS',
      'snp.vcek_chain': 'PASS',
      'snp.root': 'PASS',
    });
    expect(r.stdout).toContain(
      'PASS snp.vcek_chain — SEV-VLEK <- SEV-VLEK-Milan (the built-in AMD signing keys) <- ARK-Milan (the built-in AMD roots, self-signed)',
    );
  });

  it('fails snp.report_signature when one byte of the signed report changes', async () => {
    const bytes = Buffer.from(readFileSync(REPORT));
    bytes[0x90]! ^= 0x01; // MEASUREMENT
    const path = join(work, 'tampered.bin');
    writeFileSync(path, bytes);
    const r = await runVerifyEvidence(['--snp-report', path, '--vcek', VLEK], AT);
    expect(r.marks).toMatchObject({ 'snp.report_signature': 'FAIL', 'snp.vcek_chain': 'PASS', 'snp.root': 'PASS' });
  });

  it("the built-in Milan ASVK is AMD's, signed by ARK-Milan, with its published fingerprint", () => {
    const asvk = new X509Certificate(ASVK_MILAN);
    expect(asvk.subject).toContain('CN=SEV-VLEK-Milan');
    expect(asvk.verify(new X509Certificate(ARK_MILAN).publicKey)).toBe(true);
    expect(asvk.fingerprint256).toBe('C5:E0:81:F5:9B:7E:FA:B1:FE:2F:8B:50:5E:15:97:04:E7:2F:29:CA:B7:EF:7C:F6:28:A0:5A:42:43:90:82:F5');
  });
});
