import { createJwsSigner } from '../receipts/signer.ts';
import type { SigningKey } from '../receipts/signing-key.ts';
import { importJwks } from '../verify/jwks.ts';
import { verifyCompactJws } from '../verify/jws.ts';
import type { PublicJwk } from './peer-admission.ts';

/** How far ahead of this replica's clock a peer's heartbeat may be: clocks of one fleet agree within seconds. */
export const MAX_CLOCK_SKEW_MS = 5_000;

interface HeartbeatClaims {
  kid: string;
  replica_id: string;
  /** When the replica signed it: ms since the epoch, its own clock. */
  at: number;
}

/** A heartbeat: a compact ES256 JWS by the replica's own signing key, saying it was alive at `at`. */
export function signHeartbeat(key: SigningKey, replicaId: string, at: number): string {
  return createJwsSigner<HeartbeatClaims>(key, 'sigil-heartbeat')({ kid: key.kid, replica_id: replicaId, at });
}

/**
 * When the key `jwk` last said it was alive, read from a heartbeat Redis holds: a number only when
 * that key signed it, for itself, and not from the future (beyond MAX_CLOCK_SKEW_MS); else why not.
 */
export async function readHeartbeat(jws: string, jwk: PublicJwk, now: number): Promise<{ at: number } | { refused: string }> {
  let claims: HeartbeatClaims;
  try {
    // The one JWS verifier of receipts: ES256 only, and a header that points at another key is refused.
    const { payload, header } = verifyCompactJws(jws, (await importJwks({ keys: [jwk] })).keys);
    if (header.typ !== 'sigil-heartbeat') return { refused: 'the heartbeat is not a Sigil heartbeat' };
    claims = JSON.parse(new TextDecoder().decode(payload)) as HeartbeatClaims;
  } catch {
    return { refused: "the heartbeat is not signed by the peer's key" };
  }
  if (claims.kid !== jwk.kid || typeof claims.at !== 'number' || !Number.isFinite(claims.at)) return { refused: 'the heartbeat names another key' };
  if (claims.at > now + MAX_CLOCK_SKEW_MS) return { refused: `the heartbeat is dated ${claims.at - now} ms in the future` };
  return { at: claims.at };
}
