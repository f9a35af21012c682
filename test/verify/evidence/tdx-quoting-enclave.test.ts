import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runVerifyEvidence } from '../../support/cli.ts';

const v = (path: string) => new URL(`../../vectors/tdx/${path}`, import.meta.url).pathname;
const work = mkdtempSync(join(tmpdir(), 'sigil-tdx-qe-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const file = (name: string, content: string | Uint8Array) => {
  writeFileSync(join(work, name), content);
  return join(work, name);
};
const AT = new Date('2026-07-01T00:00:00Z');
const QUOTE = v('trustee-quote-v5.bin');
const header = readFileSync(QUOTE);
const QE_SVN = header.readUInt16LE(8);
const PCE_SVN = header.readUInt16LE(10);
const line = (stdout: string) => stdout.split('\n').find((l) => l.includes(' tdx.qe — '));

describe("the quote's quoting enclave (QE vendor id, QE SVN, PCE SVN)", () => {
  it("names Intel's QE and its SVNs as not pinned when no floor is given", async () => {
    const r = await runVerifyEvidence(['--tdx-quote', QUOTE], AT);
    expect(line(r.stdout)).toBe(
      `---- tdx.qe — NOT PINNED: Intel's quoting enclave (vendor 939a7233f79c4ca9940a0db3957f0607), QE SVN ${QE_SVN}, PCE SVN ${PCE_SVN}: no floor (tdx.min_qe_svn, tdx.min_pce_svn) was given, so an old quoting enclave would pass`,
    );
  });

  it('passes floors at the real values and fails floors one above them', async () => {
    const ok = await runVerifyEvidence(
      ['--tdx-quote', QUOTE, '--reference', file('ok.yaml', `tdx:\n  min_qe_svn: ${QE_SVN}\n  min_pce_svn: ${PCE_SVN}\n`)],
      AT,
    );
    expect(ok.marks['tdx.qe']).toBe('PASS');
    const high = await runVerifyEvidence(
      ['--tdx-quote', QUOTE, '--reference', file('high.yaml', `tdx:\n  min_qe_svn: ${QE_SVN + 1}\n  min_pce_svn: ${PCE_SVN + 1}\n`)],
      AT,
    );
    expect(line(high.stdout)).toBe(
      `FAIL tdx.qe — QE SVN ${QE_SVN} < ${QE_SVN + 1}; PCE SVN ${PCE_SVN} < ${PCE_SVN + 1}: the quote was made by a quoting enclave older than the auditor accepts`,
    );
  });

  it('fails a quote whose QE vendor id was changed (and its signature)', async () => {
    const bytes = Buffer.from(header);
    bytes[12]! ^= 0x01;
    const r = await runVerifyEvidence(['--tdx-quote', file('vendor.bin', bytes)], AT);
    expect(r.marks).toMatchObject({ 'tdx.qe': 'FAIL', 'tdx.quote_signature': 'FAIL' });
    expect(line(r.stdout)).toBe(
      "FAIL tdx.qe — QE vendor id 929a7233f79c4ca9940a0db3957f0607 is not Intel's (939a7233f79c4ca9940a0db3957f0607): the quote was made by a quoting enclave Sigil cannot vouch for",
    );
  });
});
