import { readFileSync } from 'node:fs';
import { describe, expect, it, vi } from 'vitest';

// The trust page runs the same verifier in the browser, with node:crypto replaced by the adapter the bundle uses.
// Here the verifier runs on that adapter against real hardware evidence and published vectors: same verdicts as Node's.
vi.mock('node:crypto', async () => {
  const shim = await import('../../src/trust-page/browser/node-crypto.ts');
  return { ...shim, default: shim.default };
});

const { X509Certificate, createHash, verify, createPublicKey } = await import('node:crypto');
const { verifyAttestationDocument } = await import('../../src/verify/attestation.ts');
const { SNP_CERT_GUID } = await import('../../src/verify/evidence/snp-cert-table.ts');
const { readSnpReport } = await import('../../src/verify/evidence/snp-report.ts');
const { readTdxQuote } = await import('../../src/verify/evidence/tdx-quote.ts');
const { ARK_MILAN, ASK_MILAN } = await import('../../src/verify/evidence/roots/amd-milan.ts');
const { buildSnpCertTable, snpDocument, tdxDocument } = await import('../support/evidence-fixtures.ts');
const { verifyReceipt } = await import('../../src/verify/receipt.ts');

type Checks = Array<{ name: string; ok: boolean; detail: string }>;
const fixture = (name: string) => readFileSync(new URL(`../attestation/fixtures/${name}`, import.meta.url), 'utf8');
const failing = (checks: Checks) => checks.filter((c) => !c.ok).map((c) => c.name);
const der = (pem: string) => new Uint8Array(new X509Certificate(pem).raw);
const gcpReport = new Uint8Array(Buffer.from(fixture('snp-gcp-milan-report.hex').replace(/\s/g, ''), 'hex'));
const gcpVcek = fixture('snp-gcp-milan-vcek.pem');
const azureQuote = new Uint8Array(Buffer.from(fixture('tdx-azure-quote-v4.b64').trim(), 'base64'));
const jwks = { keys: [] };
const AT = new Date('2026-06-01T00:00:00Z');

describe('the browser crypto adapter', () => {
  it('is the one in use here (the mock took)', () => {
    expect(X509Certificate.toString()).toContain('parsed');
  });

  it('hashes as node does (NIST examples)', () => {
    expect(createHash('sha256').update('abc').digest('hex')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(createHash('sha384').update('ab').update('c').digest('hex')).toBe(
      'cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7',
    );
  });

  it('verifies the real Google Cloud SNP report through VCEK -> ASK -> ARK (RSA-PSS, ECDSA P-384)', async () => {
    const table = buildSnpCertTable([
      { guid: SNP_CERT_GUID.vcek, der: der(gcpVcek) },
      { guid: SNP_CERT_GUID.ask, der: der(ASK_MILAN) },
      { guid: SNP_CERT_GUID.ark, der: der(ARK_MILAN) },
    ]);
    const measurement = Buffer.from(readSnpReport(gcpReport).measurement).toString('hex');
    const checks = (await verifyAttestationDocument(snpDocument(gcpReport, table, new Uint8Array(32), jwks, measurement, new Uint8Array(64)), { jwks, now: AT })) as Checks;
    // Their REPORT_DATA binds someone else's keys: every hardware check passes, the binding cannot.
    expect(failing(checks)).toEqual(['attestation.report_data']);
    expect(checks.find((c) => c.name === 'snp.root')?.ok).toBe(true);
  });

  it('fails the same report with one flipped bit, as node does', async () => {
    const tampered = gcpReport.slice();
    tampered[0x50] = tampered[0x50]! ^ 0x80;
    const table = buildSnpCertTable([{ guid: SNP_CERT_GUID.vcek, der: der(gcpVcek) }]);
    const checks = (await verifyAttestationDocument(snpDocument(tampered, table, new Uint8Array(32), jwks, '00', new Uint8Array(64)), { jwks, now: AT })) as Checks;
    expect(failing(checks)).toEqual(['snp.report_signature', 'attestation.report_data', 'attestation.measurement']);
  });

  it('verifies the real Azure TDX quote, QE report and PCK chain (ECDSA P-256)', async () => {
    const mrtd = Buffer.from(readTdxQuote(azureQuote).body.mrTd).toString('hex');
    const checks = (await verifyAttestationDocument(tdxDocument(azureQuote, new Uint8Array(32), jwks, mrtd, new Uint8Array(64)), { jwks, expectedMeasurement: mrtd, now: AT })) as Checks;
    expect(failing(checks)).toEqual(['attestation.report_data']);
    const tampered = azureQuote.slice();
    tampered[48 + 136] = tampered[48 + 136]! ^ 0x01;
    const bad = (await verifyAttestationDocument(tdxDocument(tampered, new Uint8Array(32), jwks, '00', new Uint8Array(64)), { jwks, now: AT })) as Checks;
    expect(failing(bad)).toContain('tdx.quote_signature');
  });

  it('gives every Wycheproof ECDSA P-256 SHA-256 (P1363) case its published verdict', () => {
    const suite = JSON.parse(readFileSync(new URL('../vectors/wycheproof/ecdsa_secp256r1_sha256_p1363_test.json', import.meta.url), 'utf8')) as {
      testGroups: Array<{ publicKeyDer: string; tests: Array<{ tcId: number; msg: string; sig: string; result: 'valid' | 'invalid' | 'acceptable' }> }>;
    };
    let cases = 0;
    for (const group of suite.testGroups) {
      const key = createPublicKey({ key: Buffer.from(group.publicKeyDer, 'hex'), format: 'der', type: 'spki' });
      for (const t of group.tests) {
        const ok = verify('sha256', Buffer.from(t.msg, 'hex'), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(t.sig, 'hex'));
        if (t.result !== 'acceptable') expect({ tcId: t.tcId, ok }).toEqual({ tcId: t.tcId, ok: t.result === 'valid' });
        cases++;
      }
    }
    expect(cases).toBeGreaterThan(200);
  });

  it('verifies a receipt signed by node and refuses it once tampered', async () => {
    const { signReceiptForTest } = await import('./receipt-signer.ts');
    const { jws, jwks: keys } = await signReceiptForTest();
    const good = await verifyReceipt(jws, { jwks: keys, allowNoTee: true, expected: { nonce: 'n-1' } });
    expect(good.checks.find((c) => c.name === 'receipt.signature')?.ok).toBe(true);
    const [h, p, s] = jws.split('.');
    const flipped = `${h}.${p}.${s!.slice(0, -2)}${s!.endsWith('A') ? 'B' : 'A'}A`;
    const bad = await verifyReceipt(flipped, { jwks: keys, allowNoTee: true, expected: { nonce: 'n-1' } });
    expect(bad.checks.find((c) => c.name === 'receipt.signature')?.ok).toBe(false);
  });
});
