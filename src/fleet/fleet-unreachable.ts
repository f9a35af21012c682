import { SigilError } from '../protocol/sigil-error.ts';

/** Redis could not be reached for a change every replica must see (a key revoked): the other replicas do not know of it yet. */
export class FleetUnreachable extends SigilError<'ERR_FLEET_UNREACHABLE'> {
  constructor(message: string) {
    super('ERR_FLEET_UNREACHABLE', message);
  }
}
