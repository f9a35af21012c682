/**
 * What a verifier tells a user about a service whose attestation binds no transparency log (docs/log.md): said
 * plainly, not as a failure (a log is an operator's choice), and not as a pass (there is nothing to check).
 */
export const NO_LOG_NOTE =
  'this service keeps no transparency log: each receipt still proves its own exchange to whoever holds it, but nothing ' +
  'publishes the receipts, so the operator could later deny one or show different clients different histories unseen (docs/log.md)';

/** The same, within `sigil verify`'s one-line verdict. */
export const NO_LOG_SHORT = 'the service keeps no transparency log (docs/log.md)';
