import { readFileSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { verifyAttestationDocument } from '../../src/verify/attestation.ts';
import type { Check } from '../../src/verify/check.ts';
import { ARK_MILAN, ASK_MILAN } from '../../src/verify/evidence/roots/amd-milan.ts';
import { SNP_CERT_GUID } from '../../src/verify/evidence/snp-cert-table.ts';
import { readSnpReport } from '../../src/verify/evidence/snp-report.ts';
import { readTdxQuote } from '../../src/verify/evidence/tdx-quote.ts';
import { buildSnpCertTable, snpDocument, tdxDocument } from '../support/evidence-fixtures.ts';

const fixture = (name: string) => readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8');
const failing = (checks: Check[]) => checks.filter((c) => !c.ok).map((c) => c.name);
const der = (pem: string) => new Uint8Array(new X509Certificate(pem).raw);

const gcpReport = new Uint8Array(Buffer.from(fixture('snp-gcp-milan-report.hex').replace(/\s/g, ''), 'hex'));
const gcpVcek = fixture('snp-gcp-milan-vcek.pem');
const azureQuote = new Uint8Array(Buffer.from(fixture('tdx-azure-quote-v4.b64').trim(), 'base64'));
// Their REPORT_DATA binds someone else's keys: only the hardware checks can pass.
const jwks = { keys: [] };
const AT = new Date('2026-06-01T00:00:00Z');

describe('a real SEV-SNP report from a Google Cloud Milan VM', () => {
  it('parses to the published values', () => {
    const report = readSnpReport(gcpReport);
    expect(report.version).toBe(5);
    expect(report.vmpl).toBe(0);
    expect(report.signatureAlgo).toBe(1);
    expect(report.signingKey).toBe('vcek');
    expect(report.policy.debug).toBe(false);
    expect(report.policy.smtAllowed).toBe(true);
    expect(Buffer.from(report.measurement).toString('hex')).toBe(
      'b747d55452e0b9e9079770a49e397c5e6d9573581e246da7baac4f28b5cdc5b1b6d19251b8ee600fd16a3708f58406f3',
    );
    expect(report.reportedTcb).toMatchObject({ bootloader: 4, tee: 0, snp: 27, microcode: 222 });
    expect(Buffer.from(report.chipId).toString('hex').slice(0, 16)).toBe('980cf7b61876cb37');
  });

  it('its signature and its VCEK -> ASK -> ARK chain verify against the built-in AMD Milan root', async () => {
    const table = buildSnpCertTable([{ guid: SNP_CERT_GUID.vcek, der: der(gcpVcek) }]);
    const measurement = Buffer.from(readSnpReport(gcpReport).measurement).toString('hex');
    const doc = snpDocument(gcpReport, table, new Uint8Array(32), jwks, measurement, new Uint8Array(64));
    const checks = await verifyAttestationDocument(doc, { jwks, now: AT });
    expect(failing(checks)).toEqual(['snp.crl', 'attestation.report_data']); // no AMD CRL comes with the document
    expect(checks.find((c) => c.name === 'snp.vcek_chain')?.detail).toBe(
      'SEV-VCEK <- SEV-Milan (the built-in AMD signing keys) <- ARK-Milan (the built-in AMD roots, self-signed); RSA-PSS SHA-384 signatures and validity checked',
    );
  });

  it("also verifies with a full table carrying AMD's ASK and ARK", async () => {
    const table = buildSnpCertTable([
      { guid: SNP_CERT_GUID.vcek, der: der(gcpVcek) },
      { guid: SNP_CERT_GUID.ask, der: der(ASK_MILAN) },
      { guid: SNP_CERT_GUID.ark, der: der(ARK_MILAN) },
    ]);
    const doc = snpDocument(
      gcpReport,
      table,
      new Uint8Array(32),
      jwks,
      'b747d55452e0b9e9079770a49e397c5e6d9573581e246da7baac4f28b5cdc5b1b6d19251b8ee600fd16a3708f58406f3',
      new Uint8Array(64),
    );
    const checks = await verifyAttestationDocument(doc, { jwks, now: AT });
    expect(failing(checks)).toEqual(['snp.crl', 'attestation.report_data']); // no AMD CRL comes with the document
  });

  it('one flipped bit in the real report breaks its signature', async () => {
    const tampered = gcpReport.slice();
    tampered[0x50] = tampered[0x50]! ^ 0x80;
    const table = buildSnpCertTable([{ guid: SNP_CERT_GUID.vcek, der: der(gcpVcek) }]);
    const doc = snpDocument(tampered, table, new Uint8Array(32), jwks, '00', new Uint8Array(64));
    const checks = await verifyAttestationDocument(doc, { jwks, now: AT });
    expect(failing(checks)).toEqual(['snp.report_signature', 'snp.crl', 'attestation.report_data', 'attestation.measurement']);
  });
});

describe('a real TDX quote v4 from an Azure TDX VM', () => {
  it('parses to the published values', () => {
    const quote = readTdxQuote(azureQuote);
    expect(quote.header.version).toBe(4);
    expect(quote.header.attestationKeyType).toBe(2);
    expect(quote.header.teeType).toBe(0x81);
    expect(Buffer.from(quote.header.qeVendorId).toString('hex')).toBe('939a7233f79c4ca9940a0db3957f0607');
    expect(Buffer.from(quote.body.mrTd).toString('hex')).toBe(
      'fe27b2aa3a05ec56864c308aff03dd13c189a6112d21e417ec1afe626a8cb9d91482d1379ec02fe6308972950a930d0a',
    );
    expect(Buffer.from(quote.body.tdAttributes).toString('hex')).toBe('0000000000000000');
    expect(quote.pckChainPem.match(/BEGIN CERTIFICATE/g)).toHaveLength(3);
  });

  it('its quote signature, QE report, key binding and PCK chain verify against the built-in Intel root', async () => {
    const mrtd = Buffer.from(readTdxQuote(azureQuote).body.mrTd).toString('hex');
    const doc = tdxDocument(azureQuote, new Uint8Array(32), jwks, mrtd, new Uint8Array(64));
    const checks = await verifyAttestationDocument(doc, { jwks, expectedMeasurement: mrtd, now: AT });
    // The real quote's RTMR3 holds that VM's own events, not the test document's Sigil event.
    expect(failing(checks)).toEqual(['attestation.report_data', 'eventlog.rtmr3']);
    expect(checks.find((c) => c.name === 'tdx.pck_chain')?.detail).toBe(
      'Intel SGX PCK Certificate <- Intel SGX PCK Platform CA <- Intel SGX Root CA; ECDSA signatures and validity checked',
    );
  });

  it('one flipped bit in the real quote body breaks its signature', async () => {
    const tampered = azureQuote.slice();
    tampered[48 + 136] = tampered[48 + 136]! ^ 0x01;
    const doc = tdxDocument(tampered, new Uint8Array(32), jwks, '00', new Uint8Array(64));
    const checks = await verifyAttestationDocument(doc, { jwks, now: AT });
    expect(failing(checks)).toEqual(['tdx.quote_signature', 'attestation.report_data', 'attestation.measurement', 'eventlog.rtmr3']);
  });
});
