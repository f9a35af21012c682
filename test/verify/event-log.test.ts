import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { Check } from '../../src/verify/check.ts';
import { readCcelEventLog } from '../../src/verify/evidence/event-log/ccel.ts';
import { readDstackEventLog } from '../../src/verify/evidence/event-log/dstack-log.ts';
import { formatEventListing } from '../../src/verify/evidence/event-log/measured-event.ts';
import { replayRtmrs } from '../../src/verify/evidence/event-log/replay.ts';
import { verifyTdxEventLog } from '../../src/verify/evidence/event-log/tdx-event-log.ts';
import { readTdxQuote } from '../../src/verify/evidence/tdx-quote.ts';

const vector = (name: string) => readFileSync(new URL(`../vectors/tdx/${name}`, import.meta.url));
const dstack = JSON.parse(vector('dstack-quote-and-eventlog.json').toString('utf8')) as { quote: string; event_log: string };
const quoteRtmrs = readTdxQuote(Buffer.from(dstack.quote, 'hex')).body.rtmr;
const ccel = new Uint8Array(vector('dstack-ccel.bin'));
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const h = (hexText: string) => new Uint8Array(Buffer.from(hexText, 'hex'));
const byName = (checks: Check[]) => Object.fromEntries(checks.map((c) => [c.name, c.ok]));

// Replayed independently (Python hashlib over the same bytes) when the vector was added.
const CCEL_RTMR0 = '274c2344116db7c663470693b5ba62b8621eac28cb41d2f816ddf188f9f423f900a1c44d32386fd3c993dc814e62af9d';
const CCEL_RTMR1 = 'bdcf4ee0f7fdfe7c73fbb19ded73193aee23a6726b86d3b282ea097cf4c9ed7a0db21b5c1ccd513e410d90e310836b26';
const ZERO = '00'.repeat(48);
const ccelRtmrs = [h(CCEL_RTMR0), h(CCEL_RTMR1), h(ZERO), h(ZERO)];

describe("dstack's quote with its JSON event log", () => {
  it('replays to exactly the RTMR0-3 of the quote', () => {
    const result = verifyTdxEventLog({ dstackLog: dstack }, quoteRtmrs);
    expect(result.checks.map((c) => [c.name, c.ok])).toEqual([
      ['eventlog.parse', true],
      ['eventlog.rtmr0', true],
      ['eventlog.rtmr1', true],
      ['eventlog.rtmr2', true],
      ['eventlog.rtmr3', true],
      ['eventlog.event_data', true],
    ]);
    expect(result.checks[0]!.detail).toBe("29 events read from dstack's JSON event log");
    expect(result.checks[4]!.detail).toBe(
      "replaying the 9 event(s) of the log for RTMR3 gives 6f24c170d0fd63fc..., the quote's RTMR3: the log accounts for everything measured there",
    );
    expect(hex(replayRtmrs(readDstackEventLog(dstack))[3])).toBe(hex(quoteRtmrs[3]));
  });

  it("lists dstack's RTMR3 events with the payload their digest covers", () => {
    const { events } = verifyTdxEventLog({ dstackLog: dstack.event_log }, quoteRtmrs);
    const composeHash = events.find((e) => e.name === 'compose-hash')!;
    expect(composeHash).toMatchObject({ index: 22, rtmr: 3, type: 'DSTACK_RUNTIME_EVENT', data_state: 'measured' });
    expect(composeHash.data).toBe('86b0e55f2fa8e4fb69d890f14f54d5612707646e2573d54e0d2ddaaade77caa9');
    expect(formatEventListing(events[8]!)).toBe('  #8 RTMR0 EV_PLATFORM_CONFIG_FLAGS "acpi-loader" 095d04cf26fe03ae... — describes "ACPI DATA"');
  });

  it('fails naming RTMR1 when one digest byte of an RTMR1 event is flipped', () => {
    const events = JSON.parse(dstack.event_log) as Array<{ imr: number; digest: string }>;
    const target = events.findIndex((e) => e.imr === 1);
    events[target]!.digest = events[target]!.digest.slice(0, -2) + (events[target]!.digest.endsWith('00') ? '01' : '00');
    const result = verifyTdxEventLog({ dstackLog: events }, quoteRtmrs);
    expect(byName(result.checks)).toEqual({
      'eventlog.parse': true,
      'eventlog.rtmr0': true,
      'eventlog.rtmr1': false,
      'eventlog.rtmr2': true,
      'eventlog.rtmr3': true,
      'eventlog.event_data': true,
    });
    expect(result.checks.find((c) => c.name === 'eventlog.rtmr1')!.detail).toMatch(
      /^replaying the 5 event\(s\) of the log for RTMR1 gives [0-9a-f]{96} but the quote's RTMR1 is 2023546e7f3b9d12[0-9a-f]{80}: the log does not describe what was measured$/,
    );
  });

  it('fails naming RTMR3 when a runtime payload is changed (the app id)', () => {
    const events = JSON.parse(dstack.event_log) as Array<{ event: string; event_payload: string }>;
    events.find((e) => e.event === 'app-id')!.event_payload = '00'.repeat(20);
    expect(byName(verifyTdxEventLog({ dstackLog: events }, quoteRtmrs).checks)['eventlog.rtmr3']).toBe(false);
  });

  it('refuses a malformed event naming it', () => {
    const result = verifyTdxEventLog({ dstackLog: [{ imr: 4, event_type: 1, digest: ZERO, event: '', event_payload: '' }] }, quoteRtmrs);
    expect(result.checks).toEqual([{ name: 'eventlog.parse', ok: false, detail: 'ERR_EVENT_LOG_MALFORMED: event 0: imr 4 is not an RTMR index 0-3' }]);
  });
});

describe("dstack's binary CCEL (TCG2 crypto-agile log)", () => {
  it('parses 18 events after the Spec ID header, all SHA-384, in RTMR0 and RTMR1', () => {
    const events = readCcelEventLog(ccel);
    expect(events).toHaveLength(18);
    expect(events.map((e) => e.rtmr)).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 1]);
    expect(replayRtmrs(events).map(hex)).toEqual([CCEL_RTMR0, CCEL_RTMR1, ZERO, ZERO]);
  });

  it('lists each event with its type, digest and, where the digest covers it, the data', () => {
    const { checks, events } = verifyTdxEventLog({ ccelData: ccel }, ccelRtmrs);
    expect(checks.every((c) => c.ok)).toBe(true);
    expect(events.slice(0, 3).map(formatEventListing)).toEqual([
      '  #0 RTMR0 EV_EFI_HANDOFF_TABLES2 2b630fa1d8fa9b6e... — describes 42 bytes 095464785461626c65000100000000000000af96bb93f2b9b84e9462e0ba7456...',
      '  #1 RTMR0 EV_EFI_PLATFORM_FIRMWARE_BLOB2 344bc51c980ba621... — describes 58 bytes 2946762858585858585858582d585858582d585858582d585858582d58585858...',
      '  #2 RTMR0 EV_EFI_VARIABLE_DRIVER_CONFIG 9dc3a1f80bcec915... — measured data EFI variable SecureBoot (0 bytes of data)',
    ]);
    expect(formatEventListing(events[14]!)).toBe('  #14 RTMR1 EV_EFI_ACTION 77a0dab2312b4e1e... — measured data "Calling EFI Application from Boot Option"');
    expect(events[7]).toMatchObject({ type: 'EV_SEPARATOR', data_state: 'measured', data: '00000000' });
  });

  it('fails naming RTMR1, and the event data check, when one byte of an EV_EFI_ACTION digest is flipped', () => {
    const tampered = Uint8Array.from(ccel);
    const at = Buffer.from(tampered).indexOf(Buffer.from('77a0dab2312b4e1e', 'hex'));
    tampered[at + 47] = tampered[at + 47]! ^ 0x01;
    const { checks } = verifyTdxEventLog({ ccelData: tampered }, ccelRtmrs);
    expect(byName(checks)).toEqual({
      'eventlog.parse': true,
      'eventlog.rtmr0': true,
      'eventlog.rtmr1': false,
      'eventlog.rtmr2': true,
      'eventlog.rtmr3': true,
      'eventlog.event_data': false,
    });
    expect(checks.find((c) => c.name === 'eventlog.event_data')!.detail).toBe(
      'event(s) #14 carry data that does not hash to their digest: the log shows something other than what was measured',
    );
  });

  it('fails the event data check when the logged text of a measured action is changed, though the replay still matches', () => {
    const tampered = Uint8Array.from(ccel);
    const at = Buffer.from(tampered).indexOf(Buffer.from('Exit Boot Services Invocation'));
    tampered[at] = 'e'.charCodeAt(0);
    expect(byName(verifyTdxEventLog({ ccelData: tampered }, ccelRtmrs).checks)).toMatchObject({ 'eventlog.rtmr1': true, 'eventlog.event_data': false });
  });

  it('refuses a log that is not crypto-agile', () => {
    const { checks } = verifyTdxEventLog({ ccelData: new Uint8Array(64) }, ccelRtmrs);
    expect(checks).toEqual([
      {
        name: 'eventlog.parse',
        ok: false,
        detail: 'ERR_EVENT_LOG_MALFORMED: the event log does not start with a TCG "Spec ID Event03" (it is not a crypto-agile TCG2 log)',
      },
    ]);
  });
});

/** A CCEL ACPI table as the firmware publishes it (ACPI 6.5, 5.2.34); built here, there is no published one. */
function ccelTable(ccType: number, logLength: number): Uint8Array {
  const t = Buffer.alloc(56);
  t.write('CCEL', 0, 'latin1');
  t.writeUInt32LE(56, 4);
  t[8] = 1;
  t.write('INTEL ', 10, 'latin1');
  t[36] = ccType;
  t.writeBigUInt64LE(BigInt(logLength), 40);
  t.writeBigUInt64LE(0x7f000000n, 48);
  t[9] = (256 - (t.reduce((a, b) => a + b, 0) % 256)) % 256;
  return new Uint8Array(t);
}

describe('the CCEL ACPI table', () => {
  it('is checked for its signature, checksum, TDX type and log length', () => {
    const ok = verifyTdxEventLog({ ccelTable: ccelTable(2, ccel.length), ccelData: ccel }, ccelRtmrs).checks[0]!;
    expect(ok).toEqual({
      name: 'eventlog.ccel_table',
      ok: true,
      detail: 'CCEL table revision 1 from INTEL, CC type 2, log area 65536 bytes at 0x7f000000: an Intel TDX event log, checksum valid',
    });
    expect(verifyTdxEventLog({ ccelTable: ccelTable(1, ccel.length), ccelData: ccel }, ccelRtmrs).checks[0]!.ok).toBe(false);
    expect(verifyTdxEventLog({ ccelTable: ccelTable(2, 4096), ccelData: ccel }, ccelRtmrs).checks[0]!.detail).toBe(
      'CCEL table revision 1 from INTEL, CC type 2, log area 4096 bytes at 0x7f000000, but the log data given is 65536 bytes: it is not the log area this table describes',
    );
    const bad = ccelTable(2, ccel.length);
    bad[20] = bad[20]! ^ 1;
    expect(verifyTdxEventLog({ ccelTable: bad, ccelData: ccel }, ccelRtmrs).checks[0]!.detail).toBe(
      "ERR_CCEL_TABLE: the CCEL table's bytes do not sum to zero (checksum off by 1)",
    );
  });
});

describe("Sigil's own runtime events", () => {
  const payload = JSON.stringify({ sigil: '0.1.0', code: 'sha256:ab', policy_hash: 'sha256:cd' });
  const digest = createHash('sha384').update(payload).digest('hex');
  const rtmr3 = createHash('sha384').update(Buffer.alloc(48)).update(Buffer.from(digest, 'hex')).digest();

  it('replay into RTMR3 after the firmware log, each digest being the SHA-384 of its payload', () => {
    const { checks, events } = verifyTdxEventLog({ ccelData: ccel, runtimeEvents: [{ imr: 3, event: 'sigil', digest, payload }] }, [
      ccelRtmrs[0]!,
      ccelRtmrs[1]!,
      h(ZERO),
      rtmr3,
    ]);
    expect(checks.every((c) => c.ok)).toBe(true);
    expect(checks.find((c) => c.name === 'eventlog.runtime_events')!.detail).toBe(
      "each of Sigil's 1 runtime event(s) has digest = SHA-384 of its published payload, so the payload is what was extended",
    );
    expect(formatEventListing(events[18]!)).toBe(
      `  #18 RTMR3 SIGIL_RUNTIME_EVENT "sigil" ${digest.slice(0, 16)}... — measured data ${JSON.stringify(payload)}`,
    );
  });

  it('fail when a published payload is not what its digest says', () => {
    const { checks } = verifyTdxEventLog({ ccelData: ccel, runtimeEvents: [{ imr: 3, event: 'sigil', digest, payload: payload.replace('cd', 'ce') }] }, [
      ccelRtmrs[0]!,
      ccelRtmrs[1]!,
      h(ZERO),
      rtmr3,
    ]);
    expect(byName(checks)).toMatchObject({ 'eventlog.runtime_events': false, 'eventlog.rtmr3': true, 'eventlog.event_data': false });
  });

  it('without a firmware log compare only RTMR3 and list RTMR0-2 as explained by nothing', () => {
    const { checks } = verifyTdxEventLog({ runtimeEvents: [{ imr: 3, event: 'sigil', digest, payload }] }, [h(CCEL_RTMR0), h(CCEL_RTMR1), h(ZERO), rtmr3]);
    expect(checks.map((c) => [c.name, c.ok, c.pinned])).toEqual([
      ['eventlog.runtime_events', true, undefined],
      ['eventlog.rtmr0', true, false],
      ['eventlog.rtmr1', true, false],
      ['eventlog.rtmr2', true, false],
      ['eventlog.rtmr3', true, undefined],
      ['eventlog.event_data', true, undefined],
    ]);
  });

  it('with no log at all say so, without passing anything', () => {
    expect(verifyTdxEventLog({}, ccelRtmrs).checks).toEqual([
      {
        name: 'eventlog.replay',
        ok: true,
        pinned: false,
        detail: 'no event log given: RTMR0-3 are explained by no event, so only reference values can vouch for them',
      },
    ]);
  });
});
