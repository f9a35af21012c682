import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runVerifyEvidence } from '../../support/cli.ts';

const v = (path: string) => new URL(`../../vectors/${path}`, import.meta.url).pathname;
const work = mkdtempSync(join(tmpdir(), 'sigil-evidence-text-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const file = (name: string, content: string | Uint8Array) => {
  writeFileSync(join(work, name), content);
  return join(work, name);
};
const AT = new Date('2026-07-01T00:00:00Z');
const quoteHex = readFileSync(v('tdx/dcap-qvl-quote-0x.hex'), 'latin1');

describe('evidence given as text', () => {
  it("reads dcap-qvl's hex quote with its 0x prefix and verifies it", async () => {
    expect(quoteHex.slice(0, 6)).toBe('0x0400');
    const r = await runVerifyEvidence(['--tdx-quote', v('tdx/dcap-qvl-quote-0x.hex')], AT);
    expect(r.stderr).toBe('');
    expect(r.marks).toMatchObject({
      'tdx.quote': 'PASS',
      'tdx.quote_signature': 'PASS',
      'tdx.qe_binding': 'PASS',
      'tdx.pck_chain': 'PASS',
      'tdx.root': 'PASS',
    });
  });

  it('reads 0X and a trailing newline too', async () => {
    const r = await runVerifyEvidence(['--tdx-quote', file('upper.hex', `0X${quoteHex.slice(2)}\n`)], AT);
    expect(r.marks['tdx.quote_signature']).toBe('PASS');
  });

  it('refuses odd-length hex with a message that says so, not as base64 or a strange version', async () => {
    const path = file('odd.hex', quoteHex.slice(0, -1));
    const r = await runVerifyEvidence(['--tdx-quote', path], AT);
    expect(r.code).toBe(3);
    expect(r.stderr).toBe(`sigil verify-evidence: could not verify: ${path} is hex text with an odd number of digits (10011): a digit is missing or extra\n`);
    const bare = file('odd-bare.hex', quoteHex.slice(2, -1));
    expect((await runVerifyEvidence(['--tdx-quote', bare], AT)).stderr).toBe(
      `sigil verify-evidence: could not verify: ${bare} is hex text with an odd number of digits (10011): a digit is missing or extra\n`,
    );
  });

  it('refuses text that is neither hex nor base64, naming the first character that is not hex', async () => {
    const path = file('bad.hex', `0x0400zz${quoteHex.slice(8)}`);
    const r = await runVerifyEvidence(['--tdx-quote', path], AT);
    expect(r.code).toBe(3);
    expect(r.stderr).toBe(`sigil verify-evidence: could not verify: ${path} starts with 0x but is not hex: "z" at digit 5\n`);
  });

  it('names the odd-length hex GPU report in gpu[0].report', async () => {
    const report = readFileSync(v('nvidia/hopper-attestation-report.hex'), 'latin1').trim();
    const path = file('gpu-odd.hex', `0x${report.slice(0, -1)}`);
    const r = await runVerifyEvidence(['--gpu-report', path, '--gpu-certs', v('nvidia/hopper-cert-chain.pem'), '--json'], AT);
    expect(r.code).toBe(1);
    const out = JSON.parse(r.stdout) as { checks: Array<{ name: string; ok: boolean; detail: string }> };
    expect(out.checks).toEqual([
      { name: 'gpu[0].report', ok: false, detail: `${path} is hex text with an odd number of digits (${report.length - 1}): a digit is missing or extra` },
    ]);
  });
});
