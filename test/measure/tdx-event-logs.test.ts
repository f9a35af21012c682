import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { EV_EFI_VARIABLE_DRIVER_CONFIG } from '../../src/verify/evidence/event-log/event-types.ts';
import { readCcelEventLog } from '../../src/verify/evidence/event-log/ccel.ts';
import { readDstackEventLog } from '../../src/verify/evidence/event-log/dstack-log.ts';
import type { MeasuredEvent } from '../../src/verify/evidence/event-log/measured-event.ts';
import { readTdxQuote } from '../../src/verify/evidence/tdx-quote.ts';
import { tdHobDigest } from '../../src/measure/td-hob.ts';
import { rtmr0Events, rtmr1Events, rtmr2Events } from '../../src/measure/tdx-boot-events.ts';
import { rtmrFromDigests, sha384 } from '../../src/measure/rtmr.ts';
import { TdvfSectionType, type TdvfSection } from '../../src/measure/tdvf-metadata.ts';

const EV_EFI_VARIABLE_BOOT = 0x80000002;

/** Two real TDX CVMs (dstack): a 2 GiB, 2 vCPU one on QEMU 8.2.2 and a 64 GiB, 16 vCPU one on QEMU 9.2.1. */
const MACHINES = [
  { name: 'dstack-0.6.0, 2 GiB', file: '../vectors/tdx/dstack-quote-and-eventlog.json' },
  { name: 'dstack, 64 GiB with a GPU', file: '../vectors/measure/tdx/dstack/quote-report.json' },
].map(({ name, file }) => {
  const json = JSON.parse(readFileSync(new URL(file, import.meta.url), 'utf8')) as { quote: string; event_log: unknown; vm_config: unknown };
  const log = typeof json.event_log === 'string' ? JSON.parse(json.event_log) : json.event_log;
  const config = (typeof json.vm_config === 'string' ? JSON.parse(json.vm_config) : json.vm_config) as { memory_size: number };
  return { name, events: readDstackEventLog(log), rtmr: readTdxQuote(Buffer.from(json.quote, 'hex')).body.rtmr, memorySize: config.memory_size };
});

/** The TD HOB and temporary-memory sections of dstack's TDVF, as dstack-mr's own test lists them (src/tdvf.rs). */
const section = (memoryAddress: number, memoryDataSize: number, type: number): TdvfSection => ({
  dataOffset: 0,
  rawDataSize: 0,
  memoryAddress,
  memoryDataSize,
  type,
  attributes: 0,
});
const DSTACK_TDVF = [
  section(0x800000, 0x6000, TdvfSectionType.TEMP_MEM),
  section(0x809000, 0x2000, TdvfSectionType.TD_HOB),
  section(0x80b000, 0x2000, TdvfSectionType.TEMP_MEM),
  section(0x810000, 0x10000, TdvfSectionType.TEMP_MEM),
];

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const digests = (events: MeasuredEvent[], rtmr: number) => events.filter((e) => e.rtmr === rtmr).map((e) => hex(e.digest));

describe('the TDX events sigil measure computes are the ones real machines recorded', () => {
  for (const m of MACHINES) {
    it(`${m.name}: the TD HOB built from the memory size is the first RTMR0 event`, () => {
      expect(hex(tdHobDigest(DSTACK_TDVF, m.memorySize))).toBe(digests(m.events, 0)[0]);
    });

    it(`${m.name}: RTMR0 rebuilt from our TD HOB and fixed events, with the log's firmware, ACPI and boot-variable digests, is the quote's RTMR0`, () => {
      const logged = m.events.filter((e) => e.rtmr === 0);
      const ours = rtmr0Events({
        tdHob: tdHobDigest(DSTACK_TDVF, m.memorySize),
        cfv: logged[1]!.digest,
        acpiLoader: logged[8]!.digest,
        acpiRsdp: logged[9]!.digest,
        acpiTables: logged[10]!.digest,
        bootVariables: logged.filter((e) => e.type === EV_EFI_VARIABLE_BOOT).map((e) => e.digest),
      });
      expect(ours.map(hex)).toEqual(logged.map((e) => hex(e.digest)));
      expect(hex(rtmrFromDigests(ours))).toBe(hex(m.rtmr[0]));
    });

    it(`${m.name}: RTMR1 from the logged kernel digest and OVMF's fixed actions is the quote's RTMR1`, () => {
      const ours = rtmr1Events(m.events.find((e) => e.rtmr === 1)!.digest);
      expect(ours.map(hex)).toEqual(digests(m.events, 1));
      expect(hex(rtmrFromDigests(ours))).toBe(hex(m.rtmr[1]));
    });

    it(`${m.name}: RTMR2 extends the command line, then the initrd`, () => {
      const logged = m.events.filter((e) => e.rtmr === 2);
      expect(logged.length).toBe(2);
      expect(hex(rtmrFromDigests(logged.map((e) => e.digest)))).toBe(hex(m.rtmr[2]));
    });
  }

  it("measures the Secure Boot variables and boot options exactly as the CCEL's own event data says", () => {
    const events = readCcelEventLog(readFileSync(new URL('../vectors/tdx/dstack-ccel.bin', import.meta.url)));
    const config = events.filter((e) => e.type === EV_EFI_VARIABLE_DRIVER_CONFIG);
    const fixed = rtmr0Events({
      tdHob: Buffer.alloc(48),
      cfv: Buffer.alloc(48),
      acpiLoader: Buffer.alloc(48),
      acpiRsdp: Buffer.alloc(48),
      acpiTables: Buffer.alloc(48),
      bootVariables: [],
    }).slice(2, 8);
    expect(config.length).toBe(5);
    expect(fixed.slice(0, 5).map(hex)).toEqual(config.map((e) => hex(e.digest)));
    expect(config.map((e) => hex(sha384(e.data)))).toEqual(config.map((e) => hex(e.digest)));
    // A boot variable's digest covers its data only: the bytes after UEFI_VARIABLE_DATA's header and name.
    const boot = events.filter((e) => e.type === EV_EFI_VARIABLE_BOOT);
    expect(boot.length).toBe(2);
    for (const e of boot) {
      const data = Buffer.from(e.data);
      const nameChars = Number(data.readBigUInt64LE(16));
      expect(hex(sha384(data.subarray(32 + nameChars * 2)))).toBe(hex(e.digest));
    }
    expect(hex(rtmr1Events(Buffer.alloc(48)).slice(1)[1]!)).toBe(hex(events.find((e) => e.rtmr === 1 && e.type === 4)!.digest));
  });

  it('puts the command line and initrd in RTMR2 as UTF-16 with a NUL, appending initrd=initrd when there is an initrd', () => {
    const [withInitrd] = rtmr2Events('console=ttyS0', Buffer.from('x'));
    expect(hex(withInitrd!)).toBe(hex(sha384(Buffer.from('console=ttyS0 initrd=initrd\0', 'utf16le'))));
    const [without, initrd] = rtmr2Events('console=ttyS0', Buffer.alloc(0));
    expect(hex(without!)).toBe(hex(sha384(Buffer.from('console=ttyS0\0', 'utf16le'))));
    expect(hex(initrd!)).toBe('38b060a751ac96384cd9327eb1b1e36a21fdb71114be07434c0cc7bf63f6e1da274edebfe76f65fbd51ad2f14898b95b');
  });
});
