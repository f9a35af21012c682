import { createHash } from 'node:crypto';
import { fail, notPinned, pass } from '../../check.ts';
import type { Check } from '../../check.ts';
import type { RuntimeEvent } from '../../../protocol/attestation.ts';
import { toHex } from '../byte-reader.ts';
import { EV_NO_ACTION } from './event-types.ts';
import { dataState, listEvent, type EventListing, type MeasuredEvent } from './measured-event.ts';

export type Rtmrs = [Uint8Array, Uint8Array, Uint8Array, Uint8Array];

/** RTMR[i] = SHA-384(RTMR[i] || digest) for each event in order, from all zeros; EV_NO_ACTION is skipped. */
export function replayRtmrs(events: readonly MeasuredEvent[]): Rtmrs {
  const rtmrs: Rtmrs = [new Uint8Array(48), new Uint8Array(48), new Uint8Array(48), new Uint8Array(48)];
  for (const event of events) {
    if (event.type === EV_NO_ACTION) continue;
    rtmrs[event.rtmr] = createHash('sha384').update(rtmrs[event.rtmr]!).update(event.digest).digest();
  }
  return rtmrs;
}

/**
 * Sigil's own RTMR events (docs/attestation.md#runtime-events) as events to replay after the firmware's, each checked first: its digest must
 * be the SHA-384 of its payload, or the published payload is not what was measured.
 */
export function readSigilRuntimeEvents(events: readonly RuntimeEvent[]): { events: MeasuredEvent[]; checks: Check[] } {
  const out: MeasuredEvent[] = [];
  const problems: string[] = [];
  events.forEach((e, i) => {
    const payload = Buffer.from(e.payload, 'utf8');
    const digest = createHash('sha384').update(payload).digest();
    if (!/^[0-9a-f]{96}$/.test(e.digest) || digest.toString('hex') !== e.digest) {
      problems.push(`event ${i} (${JSON.stringify(e.event)}) says digest ${e.digest} but its payload hashes to ${digest.toString('hex')}`);
    }
    if (!Number.isInteger(e.imr) || e.imr < 0 || e.imr > 3) problems.push(`event ${i} (${JSON.stringify(e.event)}) names RTMR ${e.imr}, not 0-3`);
    out.push({
      source: 'sigil',
      rtmr: Number.isInteger(e.imr) && e.imr >= 0 && e.imr <= 3 ? e.imr : 3,
      type: 0,
      digest: new Uint8Array(Buffer.from(e.digest, 'hex')),
      data: new Uint8Array(payload),
      name: e.event,
    });
  });
  if (events.length === 0) return { events: out, checks: [] };
  const check =
    problems.length === 0
      ? pass(
          'eventlog.runtime_events',
          `each of Sigil's ${events.length} runtime event(s) has digest = SHA-384 of its published payload, so the payload is what was extended`,
        )
      : fail('eventlog.runtime_events', `${problems.join('; ')}: the published payload is not what was measured`);
  return { events: out, checks: [check] };
}

export interface EventLogVerification {
  checks: Check[];
  /** Every event in replay order, for the report. */
  events: EventListing[];
  /** The replayed RTMRs, lowercase hex. */
  replayed: [string, string, string, string];
}

/**
 * Replays the events into RTMR0-3 and compares each with the quote's, naming the register that differs; checks that
 * every event whose data the TCG profile says is measured hashes to its digest. `what` names the log in details.
 */
export function verifyEventLog(events: readonly MeasuredEvent[], quoteRtmrs: readonly Uint8Array[], what: string): EventLogVerification {
  const replayed = replayRtmrs(events);
  const checks: Check[] = [];
  for (let i = 0; i < 4; i++) {
    const count = events.filter((e) => e.rtmr === i && e.type !== EV_NO_ACTION).length;
    const got = toHex(replayed[i]!);
    const want = toHex(quoteRtmrs[i]!);
    checks.push(
      got === want
        ? pass(
            `eventlog.rtmr${i}`,
            `replaying the ${count} event(s) of ${what} for RTMR${i} gives ${got.slice(0, 16)}..., the quote's RTMR${i}: the log accounts for everything measured there`,
          )
        : fail(
            `eventlog.rtmr${i}`,
            `replaying the ${count} event(s) of ${what} for RTMR${i} gives ${got} but the quote's RTMR${i} is ${want}: the log does not describe what was measured`,
          ),
    );
  }
  const mismatched = events.map((e, i) => ({ e, i })).filter(({ e }) => dataState(e) === 'mismatch');
  checks.push(
    mismatched.length === 0
      ? pass(
          'eventlog.event_data',
          `every event whose data is itself measured (separators, EFI actions, Secure Boot variables, GRUB commands and kernel command lines, runtime events) carries data that hashes to its digest`,
        )
      : fail(
          'eventlog.event_data',
          `event(s) ${mismatched.map(({ i }) => `#${i}`).join(', ')} carry data that does not hash to their digest: the log shows something other than what was measured`,
        ),
  );
  return { checks, events: events.map(listEvent), replayed: replayed.map(toHex) as EventLogVerification['replayed'] };
}

/** The line a report carries when there is no event log to replay. */
export function noEventLogCheck(why: string): Check {
  return notPinned('eventlog.replay', `${why}: RTMR0-3 are explained by no event, so only reference values can vouch for them`);
}
