import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
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
const { verifyGpuEvidence } = await import('../../src/verify/gpu/index.ts');

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
    const checks = (await verifyAttestationDocument(snpDocument(gcpReport, table, new Uint8Array(32), jwks, measurement, new Uint8Array(64)), {
      jwks,
      now: AT,
    })) as Checks;
    // Their REPORT_DATA binds someone else's keys: every hardware check passes, the binding cannot.
    expect(failing(checks)).toEqual(['snp.crl', 'attestation.report_data']); // no AMD CRL comes with the document
    expect(checks.find((c) => c.name === 'snp.root')?.ok).toBe(true);
  });

  it('fails the same report with one flipped bit, as node does', async () => {
    const tampered = gcpReport.slice();
    tampered[0x50] = tampered[0x50]! ^ 0x80;
    const table = buildSnpCertTable([{ guid: SNP_CERT_GUID.vcek, der: der(gcpVcek) }]);
    const checks = (await verifyAttestationDocument(snpDocument(tampered, table, new Uint8Array(32), jwks, '00', new Uint8Array(64)), {
      jwks,
      now: AT,
    })) as Checks;
    expect(failing(checks)).toEqual(['snp.report_signature', 'snp.crl', 'attestation.report_data', 'attestation.measurement']);
  });

  it('verifies the real Azure TDX quote, QE report and PCK chain (ECDSA P-256)', async () => {
    const mrtd = Buffer.from(readTdxQuote(azureQuote).body.mrTd).toString('hex');
    const checks = (await verifyAttestationDocument(tdxDocument(azureQuote, new Uint8Array(32), jwks, mrtd, new Uint8Array(64)), {
      jwks,
      expectedMeasurement: mrtd,
      now: AT,
    })) as Checks;
    // Not Sigil's quote: its REPORT_DATA is not our binding, and its RTMR3 is zero, so the Sigil start event the test document lists does not replay into it.
    expect(failing(checks)).toEqual(['attestation.report_data', 'eventlog.rtmr3']);
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

  describe('the GPU verifier (NVIDIA SPDM report, device chain, RIMs) through the adapter', () => {
    // Node's own verdicts come from a child process, where node:crypto is not replaced; the same inputs go through the adapter here.
    type Case = { label: string; entries: never[]; options: { at: string } & Record<string, unknown>; checks: Checks };
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
    const script = fileURLToPath(new URL('./gpu-verdicts-node.ts', import.meta.url));
    const cases = JSON.parse(execFileSync(process.execPath, ['--import', tsx, script], { encoding: 'utf8', maxBuffer: 16 << 20 })) as Case[];
    const through = (c: Case) => verifyGpuEvidence(c.entries, { ...c.options, at: new Date(c.options.at) }).checks as Checks;
    const byLabel = (label: string) => cases.find((c) => c.label === label)!;

    it('gives every check, word for word, the verdict node:crypto gives', () => {
      expect(cases.map((c) => c.label)).toHaveLength(7);
      for (const c of cases) expect({ label: c.label, checks: through(c) }).toEqual({ label: c.label, checks: c.checks });
    });

    it("passes the real H100 report's signature, chain to NVIDIA's root, FWID and nonce, and says the measurements were not pinned", () => {
      const checks = through(byLabel('real report, bound, at the current time'));
      expect(checks.map((c) => [c.name, c.ok])).toEqual([
        ['gpu.binding', true],
        ['gpu[0].report', true],
        ['gpu[0].certificates', true],
        ['gpu[0].signature', true],
        ['gpu[0].chain', true],
        ['gpu[0].root', true],
        ['gpu[0].fwid', true],
        ['gpu[0].nonce', true],
        ['gpu[0].measurements', true],
        ['gpu[0].revocation', true],
      ]);
      expect(checks.find((c) => c.name === 'gpu[0].signature')?.detail).toBe(
        "the GPU's key (GH100 A01 GSP FMC LF) signed the request and its answer (ECDSA P-384, SHA-384 over 4021 bytes): the measurements are the GPU's own",
      );
      expect(checks.find((c) => c.name === 'gpu[0].root')?.detail).toBe(
        'the chain ends at NVIDIA Device Identity CA, byte for byte a trusted NVIDIA device root: a genuine NVIDIA GPU made this report',
      );
      expect(checks.find((c) => c.name === 'gpu[0].measurements')).toMatchObject({ ok: true, pinned: false });
    });

    it('compares the measurements with RIMs whose XML signatures it verifies (xml-crypto on the adapter)', () => {
      expect(failing(through(byLabel('matching RIMs signed by a test root')))).toEqual([]);
      const matched = through(byLabel('matching RIMs signed by a test root'));
      expect(matched.find((c) => c.name === 'gpu[0].measurements')?.detail).toBe(
        'all 33 measurements the RIMs pin equal one of their signed values: the GPU runs the driver and VBIOS NVIDIA published',
      );
      expect(failing(through(byLabel("NVIDIA's sample RIMs (other versions)")))).toEqual(['gpu[0].driver_rim', 'gpu[0].vbios_rim', 'gpu[0].measurements']);
    });

    it('fails tampered copies: a measurement or signature byte, a RIM changed after signing', () => {
      expect(failing(through(byLabel('a measurement byte changed')))).toEqual(['gpu[0].signature']);
      expect(failing(through(byLabel('a signature byte changed')))).toEqual(['gpu[0].signature']);
      expect(failing(through(byLabel('a RIM changed after signing')))).toEqual([
        'gpu.rim[0].signature',
        'gpu.rim[0].chain',
        'gpu[0].driver_rim',
        'gpu[0].measurements',
      ]);
    });
  });
});
