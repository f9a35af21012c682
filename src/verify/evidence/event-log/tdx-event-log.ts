import { fail, notPinned, pass } from '../../check.ts';
import type { Check } from '../../check.ts';
import type { RuntimeEvent } from '../../../protocol/attestation.ts';
import { describeEvidenceError } from '../errors.ts';
import { CCEL_CC_TYPE_TDX, describeCcelTable, readCcelEventLog, readCcelTable } from './ccel.ts';
import { readDstackEventLog } from './dstack-log.ts';
import type { EventListing, MeasuredEvent } from './measured-event.ts';
import { noEventLogCheck, readSigilRuntimeEvents, verifyEventLog } from './replay.ts';

/** The measured-boot log of a TDX guest, in whichever form it came. */
export interface TdxEventLogInput {
  /** The CCEL ACPI table (/sys/firmware/acpi/tables/CCEL). */
  ccelTable?: Uint8Array;
  /** The CCEL log area (/sys/firmware/acpi/tables/data/CCEL): the firmware's TCG2 event log. */
  ccelData?: Uint8Array;
  /** dstack's JSON event log (its GetQuote response, or the events array), instead of the CCEL. */
  dstackLog?: unknown;
  /** Sigil's own runtime events, replayed after the firmware's. */
  runtimeEvents?: readonly RuntimeEvent[];
}

export interface TdxEventLogResult {
  checks: Check[];
  events: EventListing[];
}

function tableCheck(table: Uint8Array, dataLength: number | undefined): Check {
  try {
    const t = readCcelTable(table);
    if (t.ccType !== CCEL_CC_TYPE_TDX) return fail('eventlog.ccel_table', `${describeCcelTable(t)}: CC type ${t.ccType} is not Intel TDX (2)`);
    if (dataLength !== undefined && BigInt(dataLength) !== t.logAreaLength) {
      return fail('eventlog.ccel_table', `${describeCcelTable(t)}, but the log data given is ${dataLength} bytes: it is not the log area this table describes`);
    }
    return pass('eventlog.ccel_table', `${describeCcelTable(t)}: an Intel TDX event log, checksum valid`);
  } catch (err) {
    return fail('eventlog.ccel_table', describeEvidenceError(err));
  }
}

/**
 * Reads the firmware log (CCEL or dstack JSON) and Sigil's runtime events, replays RTMR0-3 and compares them with
 * the quote's. Without a firmware log only the registers runtime events extend are compared; the rest are
 * reported as explained by nothing.
 */
export function verifyTdxEventLog(input: TdxEventLogInput, quoteRtmrs: readonly Uint8Array[]): TdxEventLogResult {
  const checks: Check[] = [];
  let boot: MeasuredEvent[] | undefined;
  if (input.ccelTable !== undefined) checks.push(tableCheck(input.ccelTable, input.ccelData?.length));
  try {
    if (input.ccelData !== undefined) {
      boot = readCcelEventLog(input.ccelData);
      checks.push(pass('eventlog.parse', `${boot.length} events read from the CCEL (TCG2 crypto-agile log, SHA-384)`));
    } else if (input.dstackLog !== undefined) {
      boot = readDstackEventLog(input.dstackLog);
      checks.push(pass('eventlog.parse', `${boot.length} events read from dstack's JSON event log`));
    }
  } catch (err) {
    return { checks: [...checks, fail('eventlog.parse', describeEvidenceError(err))], events: [] };
  }
  const runtime = readSigilRuntimeEvents(input.runtimeEvents ?? []);
  checks.push(...runtime.checks);
  if (boot === undefined && runtime.events.length === 0) return { checks: [...checks, noEventLogCheck('no event log given')], events: [] };

  const what = boot === undefined ? "Sigil's runtime events" : runtime.events.length === 0 ? 'the log' : "the log and Sigil's runtime events";
  const result = verifyEventLog([...(boot ?? []), ...runtime.events], quoteRtmrs, what);
  if (boot === undefined) {
    // Without the firmware's log, a register no runtime event touches is explained by nothing.
    const touched = new Set(runtime.events.map((e) => e.rtmr));
    result.checks = result.checks.map((c) => {
      const m = /^eventlog\.rtmr(\d)$/.exec(c.name);
      return m !== null && !touched.has(Number(m[1])) ? notPinned(c.name, `no firmware event log given: RTMR${m[1]} is explained by no event`) : c;
    });
  }
  return { checks: [...checks, ...result.checks], events: result.events };
}
