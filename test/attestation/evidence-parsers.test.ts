import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { EvidenceError } from '../../src/verify/evidence/errors.ts';
import { readSnpCertTable, SNP_CERT_GUID } from '../../src/verify/evidence/snp-cert-table.ts';
import { readSnpReport } from '../../src/verify/evidence/snp-report.ts';
import { readTdxQuote } from '../../src/verify/evidence/tdx-quote.ts';
import { buildSnpCertTable, buildSnpReport } from '../support/evidence-fixtures.ts';

const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey;

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return err instanceof EvidenceError ? err.code : `not an EvidenceError: ${String(err)}`;
  }
  return undefined;
}

describe('readSnpReport', () => {
  const measurement = Buffer.alloc(48, 0xaa);
  const reportData = Buffer.alloc(64, 0xbb);

  it('reads the ABI fields at their offsets', () => {
    const report = readSnpReport(
      buildSnpReport({ reportData, measurement, policy: 0x70000n | (3n << 8n) | 2n, signingKey: 1, chipId: Buffer.alloc(64, 0xee) }, p384),
    );
    expect(report.version).toBe(5);
    expect(report.guestSvn).toBe(3);
    expect(report.policy).toMatchObject({ abiMajor: 3, abiMinor: 2, smtAllowed: true, migrateMa: true, debug: false, singleSocket: false });
    expect(report.signingKey).toBe('vlek');
    expect(report.signatureAlgo).toBe(1);
    expect(Buffer.from(report.measurement)).toEqual(measurement);
    expect(Buffer.from(report.reportData)).toEqual(reportData);
    expect(Buffer.from(report.chipId)).toEqual(Buffer.alloc(64, 0xee));
    expect(report.reportedTcb).toEqual({ raw: 0xdb18000000000004n, bootloader: 4, tee: 0, snp: 0x18, microcode: 0xdb });
    expect(report.signedBytes).toHaveLength(0x2a0);
    expect(report.signature.r).toHaveLength(48);
  });

  it('refuses a report shorter than 0x4A0 bytes with ERR_SNP_REPORT_TRUNCATED', () => {
    const bytes = buildSnpReport({ reportData, measurement }, p384);
    expect(codeOf(() => readSnpReport(bytes.subarray(0, 0x49f)))).toBe('ERR_SNP_REPORT_TRUNCATED');
    expect(codeOf(() => readSnpReport(new Uint8Array(0)))).toBe('ERR_SNP_REPORT_TRUNCATED');
  });

  it('refuses an unknown report version with ERR_SNP_REPORT_VERSION', () => {
    expect(codeOf(() => readSnpReport(buildSnpReport({ version: 1, reportData, measurement }, p384)))).toBe('ERR_SNP_REPORT_VERSION');
    expect(codeOf(() => readSnpReport(buildSnpReport({ version: 9, reportData, measurement }, p384)))).toBe('ERR_SNP_REPORT_VERSION');
  });
});

describe('readSnpCertTable', () => {
  it('reads every entry up to the zero entry, naming the known GUIDs', () => {
    const table = readSnpCertTable(
      buildSnpCertTable([
        { guid: SNP_CERT_GUID.vcek, der: new Uint8Array([1, 2, 3]) },
        { guid: SNP_CERT_GUID.ask, der: new Uint8Array([4]) },
        { guid: '00000000-0000-0000-0000-000000000001', der: new Uint8Array([5, 6]) },
      ]),
    );
    expect(table.map((e) => [e.kind, Array.from(e.data)])).toEqual([
      ['vcek', [1, 2, 3]],
      ['ask', [4]],
      ['unknown', [5, 6]],
    ]);
    expect(table[0]!.guid).toBe('63da758d-e664-4564-adc5-f4b93be8accd');
  });

  it('refuses a table without its zero entry, or with data past its end, with ERR_SNP_CERT_TABLE_TRUNCATED', () => {
    const table = buildSnpCertTable([{ guid: SNP_CERT_GUID.vcek, der: new Uint8Array(10) }]);
    expect(codeOf(() => readSnpCertTable(table.subarray(0, 24)))).toBe('ERR_SNP_CERT_TABLE_TRUNCATED');
    expect(codeOf(() => readSnpCertTable(table.subarray(0, table.length - 1)))).toBe('ERR_SNP_CERT_TABLE_TRUNCATED');
  });

  it('refuses an entry that points into the table with ERR_SNP_CERT_TABLE_MALFORMED', () => {
    const table = Buffer.from(buildSnpCertTable([{ guid: SNP_CERT_GUID.vcek, der: new Uint8Array(10) }]));
    table.writeUInt32LE(8, 16);
    expect(codeOf(() => readSnpCertTable(table))).toBe('ERR_SNP_CERT_TABLE_MALFORMED');
  });
});

describe('readTdxQuote', () => {
  const header = (version: number, keyType: number, tee: number) => {
    const quote = Buffer.alloc(48 + 584 + 4);
    quote.writeUInt16LE(version, 0);
    quote.writeUInt16LE(keyType, 2);
    quote.writeUInt32LE(tee, 4);
    return quote;
  };

  it('refuses versions other than 4 and 5 with ERR_TDX_QUOTE_VERSION, and a v5 body type it does not know', () => {
    expect(codeOf(() => readTdxQuote(header(6, 2, 0x81)))).toBe('ERR_TDX_QUOTE_VERSION');
    expect(codeOf(() => readTdxQuote(header(3, 2, 0)))).toBe('ERR_TDX_QUOTE_VERSION');
    expect(codeOf(() => readTdxQuote(header(5, 2, 0x81)))).toBe('ERR_TDX_QUOTE_UNSUPPORTED');
  });

  it('refuses other attestation key types and SGX quotes with ERR_TDX_QUOTE_UNSUPPORTED', () => {
    expect(codeOf(() => readTdxQuote(header(4, 3, 0x81)))).toBe('ERR_TDX_QUOTE_UNSUPPORTED');
    expect(codeOf(() => readTdxQuote(header(4, 2, 0)))).toBe('ERR_TDX_QUOTE_UNSUPPORTED');
  });

  it('refuses a quote whose signature data is shorter than it declares with ERR_TDX_QUOTE_TRUNCATED', () => {
    const quote = header(4, 2, 0x81);
    quote.writeUInt32LE(4000, 632);
    expect(codeOf(() => readTdxQuote(quote))).toBe('ERR_TDX_QUOTE_TRUNCATED');
    expect(codeOf(() => readTdxQuote(quote.subarray(0, 100)))).toBe('ERR_TDX_QUOTE_TRUNCATED');
  });

  it('refuses certification data other than the QE report (type 6) with ERR_TDX_QUOTE_UNSUPPORTED', () => {
    const sigData = Buffer.alloc(134);
    sigData.writeUInt16LE(5, 128);
    const quote = Buffer.concat([header(4, 2, 0x81), sigData]);
    quote.writeUInt32LE(sigData.length, 632);
    expect(codeOf(() => readTdxQuote(quote))).toBe('ERR_TDX_QUOTE_UNSUPPORTED');
  });
});
