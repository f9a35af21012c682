import { readFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { describeCheck } from '../../../src/verify/check-registry.ts';
import { verifyTdxEvidence } from '../../../src/verify/evidence/tdx-verify.ts';
import { DEFAULT_TRUST_ROOTS } from '../../../src/verify/evidence/trust-roots.ts';
import { parseReferenceValues } from '../../../src/verify/reference/reference-values.ts';
import { runVerifyEvidence } from '../../support/cli.ts';

const vector = (path: string) => new URL(`../../vectors/${path}`, import.meta.url).pathname;
const quote = (path: string) => new Uint8Array(readFileSync(vector(path)));
const work = mkdtempSync(join(tmpdir(), 'sigil-tdx-instance-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

// The PCK certificates of two real quotes (both from Intel's PCK Platform CA), as Intel wrote them.
const SPR = {
  quote: 'tdx/spr-e4-quote.bin',
  ppid: '089ddfdb9c0359c82a3bc7719239574e',
  instance: '8c314d17d205dfafcbecbb00fc87eff7',
  at: new Date('2023-06-20T00:00:00Z'),
};
const DCAP_QVL = { ppid: '811dca2a26b952e85bb6448b097ba4fd', instance: '07828474603e7019dc930775ffe8cdd2' };

const instanceOf = (yaml: string) =>
  verifyTdxEvidence(quote(SPR.quote), DEFAULT_TRUST_ROOTS, SPR.at, parseReferenceValues(yaml).tdx).checks.find((c) => c.name === 'tdx.instance');

describe('TDX machine allow-list (tdx.ppid, tdx.platform_instance_id): tdx.instance on real quotes', () => {
  it('is not pinned without a list, naming the PPID and platform instance id from the PCK certificate', () => {
    expect(verifyTdxEvidence(quote(SPR.quote), DEFAULT_TRUST_ROOTS, SPR.at).checks.find((c) => c.name === 'tdx.instance')).toEqual({
      name: 'tdx.instance',
      ok: true,
      pinned: false,
      detail: `PPID ${SPR.ppid} and platform instance id ${SPR.instance} (from Intel's PCK certificate) were compared with nothing: no machine allow-list (tdx.ppid, tdx.platform_instance_id) is pinned, so any Intel TDX machine passes`,
    });
  });

  it("passes the Sapphire Rapids quote with its PPID listed, and fails it with another machine's listed", () => {
    expect(instanceOf(`tdx:\n  ppid: [${DCAP_QVL.ppid}, ${SPR.ppid.toUpperCase()}]\n`)).toEqual({
      name: 'tdx.instance',
      ok: true,
      detail: `PPID ${SPR.ppid} and platform instance id ${SPR.instance} (from Intel's PCK certificate) are on the allow-list: this is one of the machines the auditor named`,
    });
    expect(instanceOf(`tdx:\n  ppid: ${DCAP_QVL.ppid}\n`)).toEqual({
      name: 'tdx.instance',
      ok: false,
      detail: `PPID ${SPR.ppid} is not one of the 1 allowed machine(s): the quote comes from another machine`,
    });
  });

  it('compares the platform instance id likewise, each list on its own', () => {
    expect(instanceOf(`tdx:\n  platform_instance_id: ${SPR.instance}\n`)?.ok).toBe(true);
    expect(instanceOf(`tdx:\n  ppid: ${SPR.ppid}\n  platform_instance_id: ${DCAP_QVL.instance}\n`)).toEqual({
      name: 'tdx.instance',
      ok: false,
      detail: `platform instance id ${SPR.instance} is not one of the 1 allowed platform(s): the quote comes from another machine`,
    });
  });

  it("fails dcap-qvl's quote, from another machine, against the Sapphire Rapids allow-list", () => {
    const { checks } = verifyTdxEvidence(
      quote('tdx/dcap-qvl-quote.bin'),
      DEFAULT_TRUST_ROOTS,
      new Date('2025-01-01T00:00:00Z'),
      parseReferenceValues(`tdx:\n  ppid: ${SPR.ppid}\n`).tdx,
    );
    expect(checks.find((c) => c.name === 'tdx.instance')?.detail).toBe(
      `PPID ${DCAP_QVL.ppid} is not one of the 1 allowed machine(s): the quote comes from another machine`,
    );
  });

  it('refuses an id of the wrong length, naming the key', () => {
    expect(() => parseReferenceValues('tdx:\n  ppid: abcd\n')).toThrow('tdx.ppid: must be 32 hex digits (16 bytes), got "abcd"');
  });

  it('is declared with a title a non-specialist can read', () => {
    expect(describeCheck('tdx.instance')?.title).toBe('Known Intel machine');
  });

  it('prints FAIL tdx.instance from sigil verify-evidence when the quote comes from a machine not listed', async () => {
    const listed = join(work, 'listed.yaml');
    writeFileSync(listed, `tdx:\n  ppid: [${SPR.ppid}]\n`);
    const other = join(work, 'other.yaml');
    writeFileSync(other, `tdx:\n  ppid: [${DCAP_QVL.ppid}]\n`);
    const pass = await runVerifyEvidence(['--tdx-quote', vector(SPR.quote), '--reference', listed, '--at', '2023-06-20T00:00:00Z'], SPR.at);
    expect(pass.marks['tdx.instance']).toBe('PASS');
    const fail = await runVerifyEvidence(['--tdx-quote', vector(SPR.quote), '--reference', other, '--at', '2023-06-20T00:00:00Z'], SPR.at);
    expect(fail.stdout).toContain(`FAIL tdx.instance — PPID ${SPR.ppid} is not one of the 1 allowed machine(s): the quote comes from another machine\n`);
    expect(fail.code).toBe(1);
  });
});
