import type { AttestationDocumentV2 } from '../protocol/attestation.ts';

/** The digest of the event Sigil extended into RTMR3 at start (its code, configuration and policy), or null without one. */
function selfMeasurement(doc: AttestationDocumentV2): string | null {
  const log = doc.event_log;
  if (log === null || log === undefined || !log.self_measurement?.extended) return null;
  return log.runtime_events?.at(-1)?.digest ?? null;
}

/**
 * Whether a peer's start evidence shows the same measured state as this replica's: the same TEE, a
 * launch measurement this replica trusts, the same policy (catalogue) hash and the same
 * self-measurement (code and configuration, where the TEE records one). Returns null when it does,
 * else the first difference, in words. The one place a fleet decides "same state": widen it here as
 * the self-measurement grows.
 */
export function sameMeasuredState(ours: AttestationDocumentV2, theirs: AttestationDocumentV2, trustedMeasurements: ReadonlySet<string>): string | null {
  if (theirs.tee !== ours.tee) return `the peer runs on tee ${String(theirs.tee)}, this replica on ${ours.tee}`;
  if (typeof theirs.measurement !== 'string' || !trustedMeasurements.has(theirs.measurement.toLowerCase())) {
    return `the peer's launch measurement ${String(theirs.measurement)} is not this replica's nor one of fleet.trusted_measurements`;
  }
  if (theirs.binding?.policy_hash !== ours.binding.policy_hash) {
    return `the peer serves another catalogue (policy hash ${String(theirs.binding?.policy_hash)}, this replica ${ours.binding.policy_hash})`;
  }
  const mine = selfMeasurement(ours);
  if (mine !== null && selfMeasurement(theirs) !== mine) {
    return `the peer measured other code or configuration into RTMR3 (${String(selfMeasurement(theirs))}, this replica ${mine})`;
  }
  return null;
}
