/**
 * `attestation.events` and `receipt.event`: Sigil's runtime events (start, then each reload) replayed against the
 * binding, and a receipt tied to the event in force when it was signed. On TDX the events are also replayed into
 * RTMR3 (`eventlog.rtmr3`); on SEV-SNP the binding's list of event digests, signed into REPORT_DATA, is what makes them
 * evidence (docs/attestation.md, "Runtime events").
 */
import { createHash } from 'node:crypto';
import { RUNTIME_EVENT_KIND, type RuntimeEventPayload } from '../protocol/attestation.ts';
import { fail, notPinned, pass } from './check.ts';
import type { Check } from './check.ts';

export interface ReplayedEvent {
  digest: string;
  payload: RuntimeEventPayload;
}

function readEvents(eventLog: unknown): ReplayedEvent[] | string {
  const list = (eventLog as { runtime_events?: unknown } | null)?.runtime_events;
  if (!Array.isArray(list)) return 'the document carries no list of runtime events';
  const out: ReplayedEvent[] = [];
  for (const [i, e] of list.entries()) {
    const ev = e as { digest?: unknown; payload?: unknown };
    if (typeof ev?.digest !== 'string' || typeof ev.payload !== 'string') return `runtime event ${i} is not {digest, payload}`;
    const actual = createHash('sha384').update(ev.payload, 'utf8').digest('hex');
    if (actual !== ev.digest) return `runtime event ${i} says digest ${ev.digest} but its payload hashes to ${actual}`;
    let payload: RuntimeEventPayload;
    try {
      payload = JSON.parse(ev.payload) as RuntimeEventPayload;
    } catch {
      return `runtime event ${i}'s payload is not JSON`;
    }
    // Events of earlier Sigil versions may precede ours in RTMR3; only this version's kind is read for what it states.
    if (payload.kind !== RUNTIME_EVENT_KIND) continue;
    if (
      typeof payload.manifest_sha384 !== 'string' ||
      typeof payload.policy_hash !== 'string' ||
      typeof payload.at !== 'string' ||
      Number.isNaN(Date.parse(payload.at))
    ) {
      return `runtime event ${i} does not name a manifest, a policy hash and a time`;
    }
    out.push({ digest: ev.digest, payload });
  }
  return out;
}

/** The events the binding lists, checked against the event log, with the last naming the manifest and policy the binding states. */
export function runtimeEventChecks(binding: unknown, eventLog: unknown, pinnedManifests?: readonly string[]): { checks: Check[]; events: ReplayedEvent[] } {
  const b = (binding ?? {}) as { runtime_events_sha384?: unknown; manifest_sha384?: unknown; policy_hash?: unknown };
  const events = readEvents(eventLog);
  if (typeof events === 'string') return { checks: [fail('attestation.events', `${events}: nobody can say what ran after start`)], events: [] };
  const listed = b.runtime_events_sha384;
  const logged = ((eventLog as { runtime_events: Array<{ digest: string }> }).runtime_events ?? []).map((e) => e.digest);
  if (!Array.isArray(listed) || listed.join() !== logged.join()) {
    return {
      checks: [
        fail(
          'attestation.events',
          `the event log lists ${logged.length} event(s) but the binding vouches for ${Array.isArray(listed) ? listed.length : 'none'} (or others): the log is not the one the enclave signed`,
        ),
      ],
      events,
    };
  }
  const last = events.at(-1);
  if (last === undefined)
    return {
      checks: [
        fail('attestation.events', 'no runtime event names the manifest in force: the evidence does not say which code, configuration and catalogue run'),
      ],
      events,
    };
  const problems: string[] = [];
  if (last.payload.manifest_sha384 !== b.manifest_sha384)
    problems.push(`the last event names manifest ${last.payload.manifest_sha384}, the binding ${String(b.manifest_sha384)}`);
  if (last.payload.policy_hash !== b.policy_hash)
    problems.push(`the last event names policy ${last.payload.policy_hash}, the binding ${String(b.policy_hash)}`);
  if (problems.length > 0) return { checks: [fail('attestation.events', `${problems.join('; ')}: the state in force is not the one last measured`)], events };
  const checks = [
    pass(
      'attestation.events',
      `${events.length} runtime event(s) replayed in order (${events.map((e) => e.payload.reason).join(', ')}); the last names the manifest and policy the enclave binds now`,
    ),
  ];
  if (pinnedManifests === undefined)
    checks.push(
      notPinned(
        'attestation.manifest',
        `manifest ${last.payload.manifest_sha384} is measured; compare it with what \`sigil measure self\` prints for this release and configuration (sigil.manifest_sha384 in the reference values)`,
      ),
    );
  else
    checks.push(
      pinnedManifests.includes(last.payload.manifest_sha384)
        ? pass(
            'attestation.manifest',
            `manifest ${last.payload.manifest_sha384} is one the reference values accept: the code, runtime, configuration and catalogue are the audited ones`,
          )
        : fail(
            'attestation.manifest',
            `manifest ${last.payload.manifest_sha384} is not among the reference values' ${pinnedManifests.join(', ')}: something that decides behaviour differs from the audited build or configuration`,
          ),
    );
  return { checks, events };
}

/**
 * A development document (tee none) reports the manifest its process computed: vouched for by no hardware, it is compared
 * all the same, so a reviewer sees which code and configuration the process says it runs; the words say who vouches for it.
 */
export function reportedManifestCheck(binding: unknown, pinnedManifests?: readonly string[]): Check {
  const reported = (binding as { manifest_sha384?: unknown } | null)?.manifest_sha384;
  const said = `manifest ${String(reported)} is reported, not hardware-backed (tee none: only the process says so)`;
  if (typeof reported !== 'string')
    return notPinned('attestation.manifest', 'the development document (tee none) reports no manifest: nothing says which code runs');
  if (pinnedManifests === undefined)
    return notPinned('attestation.manifest', `${said}; compare it with what \`sigil measure self\` prints for this build and configuration`);
  return pinnedManifests.includes(reported)
    ? pass('attestation.manifest', `${said}; it is one the reference values accept, which no hardware confirms`)
    : fail(
        'attestation.manifest',
        `${said}, and it is not among the reference values' ${pinnedManifests.join(', ')}: the process says it runs other code or configuration than the audited one`,
      );
}

/**
 * Ties a receipt to the event in force when it was signed (the last whose time is at or before the receipt's `iat`,
 * compared in whole seconds as `iat` is; within the second of a reload either side is accepted) by its policy hash.
 */
export function receiptEventCheck(events: readonly ReplayedEvent[], receipt: { policy_hash: string; iat: number }): Check {
  const seconds = (e: ReplayedEvent) => Math.floor(Date.parse(e.payload.at) / 1000);
  const before = events.filter((e) => seconds(e) <= receipt.iat);
  const inForce = before.at(-1);
  if (inForce === undefined) return fail('receipt.event', `the receipt was signed at ${receipt.iat}, before any measured event: no measured state covers it`);
  const candidates = seconds(inForce) === receipt.iat && before.length > 1 ? [inForce, before.at(-2)!] : [inForce];
  const match = candidates.find((e) => e.payload.policy_hash === receipt.policy_hash);
  return match !== undefined
    ? pass(
        'receipt.event',
        `the receipt's policy ${receipt.policy_hash} is the one measured by event ${match.payload.seq} (${match.payload.reason} at ${match.payload.at}), in force when it was signed`,
      )
    : fail(
        'receipt.event',
        `the receipt carries policy ${receipt.policy_hash}, but the event in force when it was signed (${inForce.payload.reason} at ${inForce.payload.at}) measured policy ${inForce.payload.policy_hash}`,
      );
}
