import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runVerifyEvidence } from '../../support/cli.ts';

const v = (path: string) => new URL(`../../vectors/snp/${path}`, import.meta.url).pathname;
const work = mkdtempSync(join(tmpdir(), 'sigil-snp-guest-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const file = (name: string, content: string | Uint8Array) => {
  writeFileSync(join(work, name), content);
  return join(work, name);
};
// dstack's Milan attestation is an envelope; the 1184-byte report starts at byte 4.
const milanBytes = readFileSync(v('dstack-milan-attestation.bin')).subarray(4, 4 + 1184);
const milan = file('milan.bin', milanBytes);
const VCEK = v('dstack-milan-vcek.pem');
const AT = new Date('2026-07-01T00:00:00Z');
const CHIP_ID = Buffer.from(milanBytes.subarray(0x1a0, 0x1e0)).toString('hex');
const REPORT_ID = Buffer.from(milanBytes.subarray(0x140, 0x160)).toString('hex');
const NEW_CHECKS = ['snp.provisional_firmware', 'snp.firmware_version', 'snp.guest_policy', 'snp.platform_info', 'snp.id_block', 'snp.instance', 'snp.product'];

const pinned = (extra = '') => `snp:
  min_build: 29
  min_api_version: "1.55"
  min_guest_svn: 0
  family_id: ${'00'.repeat(16)}
  image_id: ${'00'.repeat(16)}
  chip_id: [${'ab'.repeat(64)}, ${CHIP_ID}]
  report_id: ${REPORT_ID}
  policy:
    single_socket: false
    ciphertext_hiding: false
    page_swap_disabled: false
  platform_info:
    smt_enabled: [true, false]
    tsme_enabled: false
    ecc_enabled: true
    alias_check_complete: true
${extra}`;

const run = async (reference: string, report = milan, vcek = VCEK, at = AT) => {
  const r = await runVerifyEvidence(['--snp-report', report, '--vcek', vcek, '--reference', file(`ref-${Math.random()}.yaml`, reference)], at);
  return { ...r, mark: (name: string) => r.marks[name], line: (name: string) => r.stdout.split('\n').find((l) => l.includes(` ${name} — `)) };
};

describe("go-sev-guest's validate checks on a real Milan report", () => {
  it('shows each new check as not pinned when nothing is pinned, except the firmware commit and the product line', async () => {
    const r = await runVerifyEvidence(['--snp-report', milan, '--vcek', VCEK], AT);
    expect(NEW_CHECKS.map((n) => [n, r.marks[n]])).toEqual([
      ['snp.provisional_firmware', 'PASS'],
      ['snp.firmware_version', '----'],
      ['snp.guest_policy', '----'],
      ['snp.platform_info', '----'],
      ['snp.id_block', '----'],
      ['snp.instance', '----'],
      ['snp.product', 'PASS'],
    ]);
    expect(r.stdout).toContain('PASS snp.product — CPUID family 0x19 model 0x1 is Milan, and the signing key was issued by SEV-Milan: the same product line\n');
  });

  it('passes every pin taken from the real report', async () => {
    const r = await run(pinned());
    expect(NEW_CHECKS.map((n) => [n, r.mark(n)])).toEqual(NEW_CHECKS.map((n) => [n, 'PASS']));
    expect(r.line('snp.instance')).toBe(
      'PASS snp.instance — CHIP_ID, REPORT_ID as pinned (REPORT_ID_MA is all ones: no migration agent is bound to this guest): this is one of the machines and guests the auditor named',
    );
  });

  it('fails the machine allow-list for a chip that is not on it', async () => {
    const r = await run(pinned().replace(`, ${CHIP_ID}]`, ']'));
    expect(r.mark('snp.instance')).toBe('FAIL');
    expect(r.line('snp.instance')).toBe(
      `FAIL snp.instance — CHIP_ID ${CHIP_ID.slice(0, 16)}... is not one of the 1 allowed machine(s): the report comes from elsewhere`,
    );
  });

  it('fails firmware below the minimum build or API version', async () => {
    const r = await run(pinned().replace('min_build: 29', 'min_build: 30').replace('"1.55"', '"1.56"'));
    expect(r.line('snp.firmware_version')).toBe(
      'FAIL snp.firmware_version — SEV firmware current 1.55 build 29, committed 1.55 build 29: current build 29 < 30; current API 1.55 < 1.56; committed build 29 < 30; committed API 1.55 < 1.56; firmware this old lacks fixes the auditor requires',
    );
  });

  it('fails a pinned policy bit, PLATFORM_INFO bit, family id or guest SVN that differs', async () => {
    const r = await run(
      pinned()
        .replace('single_socket: false', 'single_socket: true')
        .replace('ecc_enabled: true', 'ecc_enabled: false')
        .replace(`family_id: ${'00'.repeat(16)}`, `family_id: ${'01'.repeat(16)}`)
        .replace('min_guest_svn: 0', 'min_guest_svn: 1'),
    );
    expect(r.line('snp.guest_policy')).toBe(
      'FAIL snp.guest_policy — guest policy 0x30000: single_socket is clear (the guest may run on one socket only when set), accepted: set',
    );
    expect(r.line('snp.platform_info')).toBe(
      'FAIL snp.platform_info — PLATFORM_INFO 0x25: ecc_enabled is set (ECC memory is in use when set), accepted: clear',
    );
    expect(r.line('snp.id_block')).toBe(
      `FAIL snp.id_block — family_id ${'00'.repeat(16)} is not an accepted value; guest SVN 0 < 1: the guest was not launched with the identity the auditor expects`,
    );
  });

  it('fails an author key pin when the report has no author key', async () => {
    const r = await run(pinned(`  author_key_digest: ${'00'.repeat(48)}\n`));
    expect(r.line('snp.id_block')).toBe(
      'FAIL snp.id_block — AUTHOR_KEY_EN is clear: no author key signed the ID key: the guest was not launched with the identity the auditor expects',
    );
  });

  it('fails the product line when the report claims a Genoa CPU but its key is a Milan VCEK (and the signature)', async () => {
    const genoa = Buffer.from(milanBytes);
    genoa[0x189] = 0x11;
    const r = await run(pinned(), file('genoa.bin', genoa));
    expect(r.mark('snp.report_signature')).toBe('FAIL');
    expect(r.line('snp.product')).toBe(
      "FAIL snp.product — the report says a Genoa CPU (CPUID family 0x19 model 0x11) but SEV-VCEK was issued by SEV-Milan: the key is another product line's",
    );
  });

  it("fails trustee's Milan VLEK report, which runs provisional microcode, unless provisional firmware is permitted", async () => {
    const vlek = [v('trustee-milan-vlek-report.bin'), v('trustee-milan-vlek.der'), new Date('2025-06-01T00:00:00Z')] as const;
    const strict = await run('snp:\n  vmpl: 1\n', ...vlek);
    expect(strict.line('snp.provisional_firmware')).toBe(
      'FAIL snp.provisional_firmware — the running firmware (1.55 build 29, TCB 0xdc18000000000004) is provisional: the committed one is 1.55 build 29, TCB 0xdb18000000000004, and the machine may go back to it; accept that with snp.permit_provisional_firmware: true',
    );
    const permitted = await run('snp:\n  permit_provisional_firmware: true\n', ...vlek);
    expect(permitted.mark('snp.provisional_firmware')).toBe('PASS');
    expect(permitted.mark('snp.product')).toBe('PASS');
  });
});
