import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { runMeasure } from './run-measure.ts';
import { rtmrFromDigests, sha384 } from '../../src/measure/rtmr.ts';
import { tdHobDigest } from '../../src/measure/td-hob.ts';
import { readTdvfMetadata } from '../../src/measure/tdvf-metadata.ts';
import { readDstackEventLog } from '../../src/verify/evidence/event-log/dstack-log.ts';
import { parseReferenceValues } from '../../src/verify/reference/reference-values.ts';

const work = mkdtempSync(join(tmpdir(), 'sigil-measure-tdx-'));
/** Debian 12's OVMF.fd (package ovmf 2022.11-6+deb12u2), a real TDX-capable firmware. */
const FIRMWARE = join(work, 'OVMF.fd');
writeFileSync(FIRMWARE, gunzipSync(readFileSync(new URL('../vectors/measure/tdx/debian-ovmf/OVMF.fd.gz', import.meta.url))));

describe('sigil measure tdx reads a real TDX firmware', () => {
  it("finds its TDVF sections, whose TD HOB for 2 GiB is the one a real 2 GiB TD's event log recorded", () => {
    const sections = readTdvfMetadata(readFileSync(FIRMWARE));
    expect(sections.map((s) => [s.type, s.memoryAddress.toString(16), s.memoryDataSize.toString(16), s.attributes])).toEqual([
      [0, 'ffe20000', '1e0000', 1],
      [1, 'ffe00000', '20000', 0],
      [3, '810000', '10000', 0],
      [3, '80b000', '2000', 0],
      [2, '809000', '2000', 0],
      [3, '800000', '6000', 0],
    ]);
    const log = JSON.parse(readFileSync(new URL('../vectors/tdx/dstack-quote-and-eventlog.json', import.meta.url), 'utf8')) as { event_log: unknown };
    const firstRtmr0 = readDstackEventLog(typeof log.event_log === 'string' ? JSON.parse(log.event_log) : log.event_log)[0]!;
    expect(tdHobDigest(sections, 2 * 2 ** 30).toString('hex')).toBe(Buffer.from(firstRtmr0.digest).toString('hex'));
  });

  it('prints MRTD as a reference-values file and says which registers it left unpinned and why', async () => {
    const result = await runMeasure(['tdx', '--firmware', FIRMWARE]);
    expect(result.code).toBe(0);
    const values = parseReferenceValues(result.stdout);
    expect(Object.keys(values.tdx!)).toEqual(['mrtd']);
    expect(values.tdx!.mrtd![0]).toMatch(/^[0-9a-f]{96}$/);
    expect(result.stdout).toContain('  # rtmr1: not computed (not pinned): give --kernel\n');
    const twoPass = parseReferenceValues((await runMeasure(['tdx', '--firmware', FIRMWARE, '--page-add-order', 'two-pass'])).stdout);
    expect(twoPass.tdx!.mrtd![0]).not.toBe(values.tdx!.mrtd![0]);
  });

  it('pins all four registers when given a kernel, an initrd, a command line and the firmware configuration', async () => {
    const kernel = new URL('../vectors/measure/pe/fwupdx64.efi.signed', import.meta.url).pathname;
    const file = (name: string, bytes: Buffer) => {
      const path = join(work, name);
      writeFileSync(path, bytes);
      return path;
    };
    const tables = file('tables', Buffer.from('tables')),
      rsdp = file('rsdp', Buffer.from('rsdp')),
      loader = file('loader', Buffer.from('loader'));
    const bootOrder = file('BootOrder', Buffer.alloc(2)),
      boot0000 = file('Boot0000', Buffer.from('option'));
    const args = [
      'tdx',
      '--firmware',
      FIRMWARE,
      '--memory',
      '2G',
      '--kernel',
      kernel,
      '--append',
      'console=ttyS0',
      '--acpi-tables',
      tables,
      '--acpi-rsdp',
      rsdp,
      '--acpi-loader',
      loader,
      '--boot-order',
      bootOrder,
      '--boot-option',
      boot0000,
    ];
    const result = await runMeasure(args);
    expect(result.code).toBe(0);
    const tdx = parseReferenceValues(result.stdout).tdx!;
    expect(Object.keys(tdx)).toEqual(['mrtd', 'rtmr0', 'rtmr1', 'rtmr2']);
    // Without an initrd RTMR2 holds the command line (UTF-16, NUL-terminated) and an empty initrd.
    expect(tdx.rtmr2).toEqual([rtmrFromDigests([sha384(Buffer.from('console=ttyS0\0', 'utf16le')), sha384(Buffer.alloc(0))]).toString('hex')]);
    // Each input moves its own register only.
    const other = parseReferenceValues((await runMeasure(args.map((a) => (a === boot0000 ? bootOrder : a)))).stdout).tdx!;
    expect([other.mrtd, other.rtmr1, other.rtmr2]).toEqual([tdx.mrtd, tdx.rtmr1, tdx.rtmr2]);
    expect(other.rtmr0).not.toEqual(tdx.rtmr0);
  });

  it('describes every option under --help', async () => {
    const result = await runMeasure(['tdx', '--help']);
    for (const option of [
      '--firmware',
      '--page-add-order',
      '--memory',
      '--kernel',
      '--initrd',
      '--append',
      '--acpi-data-size',
      '--acpi-tables',
      '--acpi-rsdp',
      '--acpi-loader',
      '--boot-order',
      '--boot-option',
      '--digest',
    ]) {
      expect(result.stdout).toMatch(new RegExp(`^  ${option} `, 'm'));
    }
  });

  it.each([
    [
      'part of the RTMR0 inputs',
      ['--acpi-tables', FIRMWARE],
      2,
      'RTMR0 needs all of --acpi-tables, --acpi-rsdp, --acpi-loader, --boot-order; missing --acpi-rsdp, --acpi-loader, --boot-order',
    ],
    ['an initrd without a kernel', ['--initrd', FIRMWARE], 2, '--initrd and --append are measured only with a kernel'],
    ['an unknown page order', ['--page-add-order', 'random'], 2, '--page-add-order must be single-pass or two-pass, got "random"'],
    ['a memory size it cannot read', ['--memory', 'lots'], 2, '--memory must be a size such as 2G'],
  ])('refuses %s', async (_name, args, code, message) => {
    const result = await runMeasure(['tdx', '--firmware', FIRMWARE, ...args]);
    expect(result.code).toBe(code);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(message);
  });

  it('refuses a firmware without TDX metadata', async () => {
    const snpOnly = new URL('../vectors/measure/snp/dstack/synthetic_snp_ovmf_4k.bin', import.meta.url).pathname;
    const result = await runMeasure(['tdx', '--firmware', snpOnly]);
    expect(result).toEqual({
      code: 1,
      stdout: '',
      stderr: 'sigil measure tdx: the firmware has no TDX metadata entry in its footer table: it is not a TDX firmware (TDVF) (ERR_MEASURE_FIRMWARE)\n',
    });
  });
});
