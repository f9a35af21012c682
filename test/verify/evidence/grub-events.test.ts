import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runVerifyEvidence } from '../../support/cli.ts';

const v = (path: string) => new URL(`../../vectors/tdx/${path}`, import.meta.url).pathname;
const work = mkdtempSync(join(tmpdir(), 'sigil-grub-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const AT = new Date('2026-07-01T00:00:00Z');
// A Container-Optimized OS 113 TDX VM on Google Cloud: its quote, CCEL table and log (GRUB measures its commands).
const QUOTE = v('go-tdx-guest-cos-113-quote.bin');
const TABLE = v('go-tdx-guest-cos-113-ccel-table.bin');
const DATA = v('go-tdx-guest-cos-113-ccel-data.bin');

const verify = (data: string) => runVerifyEvidence(['--tdx-quote', QUOTE, '--ccel-table', TABLE, '--ccel-data', data], AT);

/** The log with `from` replaced by `to` (same length, so the log still parses) inside event data. */
function edited(from: string, to: string): string {
  expect(to.length).toBe(from.length);
  const bytes = Buffer.from(readFileSync(DATA));
  const at = bytes.indexOf(from, 0, 'latin1');
  expect(at).toBeGreaterThan(0);
  bytes.write(to, at, 'latin1');
  const path = join(work, `edited-${to.replace(/\W/g, '_')}.bin`);
  writeFileSync(path, bytes);
  return path;
}

describe('GRUB string events in a real TDX event log', () => {
  it('shows the kernel command line and GRUB commands as measured data, each hashing to its digest', async () => {
    const r = await verify(DATA);
    // Genuine and consistent, but nothing pinned (no reference values, no REPORT_DATA): fail closed, exit 1, no FAIL.
    expect(r.code).toBe(1);
    expect(Object.values(r.marks)).not.toContain('FAIL');
    expect(r.stdout.trimEnd().split('\n').at(-1)).toBe(
      'NOT VERIFIED: 17 checks passed; 14 not pinned, so compared with nothing (tdx.qe, tdx.instance, tdx.td_attributes, tdx.xfam, tdx.mrseam, tdx.tee_tcb_svn, tdx.tcb_status, evidence.report_data, reference.values, reference.mrtd, reference.rtmr0, reference.rtmr1, reference.rtmr2, reference.rtmr3); the code was not compared with reference values',
    );
    expect(r.marks).toMatchObject({
      'eventlog.rtmr0': 'PASS',
      'eventlog.rtmr1': 'PASS',
      'eventlog.rtmr2': 'PASS',
      'eventlog.rtmr3': 'PASS',
      'eventlog.event_data': 'PASS',
      'tdx.quote_signature': 'PASS',
    });
    expect(r.stdout).toContain('  #25 RTMR2 EV_IPL 36142e70be9729df... — measured data "defaultA=2" (GRUB grub_cmd)\n');
    expect(r.stdout).toMatch(
      /\n {2}#40 RTMR2 EV_IPL 129cc599796a3afe\.\.\. — measured data "\/syslinux\/vmlinuz\.A init=\/usr\/lib\/systemd\/systemd rootwait ro noresume loglevel=7 [^\n]*" \(GRUB kernel_cmdline\)\n/,
    );
  });

  it('fails eventlog.event_data naming the event when the kernel command line shown was edited', async () => {
    const r = await verify(
      edited('kernel_cmdline: /syslinux/vmlinuz.A init=/usr/lib/systemd/systemd', `kernel_cmdline: /syslinux/vmlinuz.A ${'init=/bin/sh'.padEnd(29, '/')}`),
    );
    expect(r.marks).toMatchObject({ 'eventlog.rtmr2': 'PASS', 'eventlog.event_data': 'FAIL' });
    expect(r.stdout).toContain(
      'FAIL eventlog.event_data — event(s) #40 carry data that does not hash to their digest: the log shows something other than what was measured\n',
    );
    expect(r.stdout).toContain('  #40 RTMR2 EV_IPL 129cc599796a3afe... — DATA DOES NOT HASH TO THE DIGEST: "/syslinux/vmlinuz.A init=/bin/sh');
  });

  it('fails eventlog.event_data when one character of a GRUB command was changed', async () => {
    const r = await verify(edited('grub_cmd: set timeout=0', 'grub_cmd: set timeout=9'));
    expect(r.marks['eventlog.event_data']).toBe('FAIL');
    expect(r.stdout).toContain('FAIL eventlog.event_data — event(s) #31 carry data');
  });
});
