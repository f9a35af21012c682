import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { EvidenceReport } from '../../../src/cli/verify-evidence.ts';
import { readTdxQuote } from '../../../src/verify/evidence/tdx-quote.ts';
import { runVerifyEvidence } from '../../support/cli.ts';

const v = (path: string) => new URL(`../../vectors/tdx/${path}`, import.meta.url).pathname;
const work = mkdtempSync(join(tmpdir(), 'sigil-tdx-v5-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const AT = new Date('2026-07-01T00:00:00Z');

const HARDWARE_CHECKS = ['tdx.quote', 'tdx.quote_signature', 'tdx.qe_report_signature', 'tdx.qe_binding', 'tdx.pck_chain', 'tdx.root', 'tdx.debug'];

// Three real TDX 1.5 quotes (version 5, TD report body type 3) published by three projects.
const V5_QUOTES = ['go-tdx-guest-quote-v5.bin', 'dcap-qvl-quote-v5-outdated.bin', 'trustee-quote-v5.bin'];

describe('TDX quote version 5 (TDX 1.5 TD report)', () => {
  for (const file of V5_QUOTES) {
    it(`passes every hardware check on ${file}`, async () => {
      const r = await runVerifyEvidence(['--tdx-quote', v(file), '--json'], AT);
      const report = JSON.parse(r.stdout) as EvidenceReport;
      const marks = Object.fromEntries(report.checks.map((c) => [c.name, c.ok]));
      for (const name of HARDWARE_CHECKS) expect([name, marks[name]]).toEqual([name, true]);
      expect(report.checks.find((c) => c.name === 'tdx.quote')?.detail).toMatch(/^TDX quote v5, TD report 1\.5 \(body type 3, 648 bytes\)/);
    });

    it(`fails ${file} under tdx.quote_signature when one byte of its TD report is changed`, async () => {
      const bytes = Buffer.from(readFileSync(v(file)));
      bytes[48 + 6 + 16 + 48 + 48 + 8 + 8 + 8 + 5]! ^= 0x01; // a byte of MRTD
      const path = join(work, `tampered-${file}`);
      writeFileSync(path, bytes);
      const r = await runVerifyEvidence(['--tdx-quote', path, '--json'], AT);
      const report = JSON.parse(r.stdout) as EvidenceReport;
      expect(report.checks.filter((c) => !c.ok && HARDWARE_CHECKS.includes(c.name)).map((c) => c.name)).toEqual(['tdx.quote_signature']);
    });
  }

  it('reads the TD report 1.5 fields: TEE_TCB_SVN2 and MRSERVICETD', () => {
    const quote = readTdxQuote(new Uint8Array(readFileSync(v('go-tdx-guest-quote-v5.bin'))));
    expect(quote.header.version).toBe(5);
    expect(quote.bodyType).toBe(3);
    expect(quote.signedBytes.length).toBe(48 + 6 + 648);
    expect(quote.body.teeTcbSvn2?.length).toBe(16);
    expect(quote.body.mrServiceTd?.length).toBe(48);
  });

  it('refuses a v5 quote whose body type is unknown, naming it', () => {
    const bytes = Buffer.from(readFileSync(v('trustee-quote-v5.bin')));
    bytes.writeUInt16LE(9, 48);
    expect(() => readTdxQuote(new Uint8Array(bytes))).toThrow('TDX quote v5 body type 9 is not supported (expected 2, a TD report 1.0, or 3, a TD report 1.5)');
  });
});
