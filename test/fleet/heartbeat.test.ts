import { CompactSign } from 'jose';
import { describe, expect, it } from 'vitest';
import { MAX_CLOCK_SKEW_MS, readHeartbeat, signHeartbeat } from '../../src/fleet/heartbeat.ts';
import type { PublicJwk } from '../../src/fleet/peer-admission.ts';
import { loadSigningKey } from '../../src/receipts/signing-key.ts';

const NOW = 1_780_000_000_000;

describe('a heartbeat, read with the one JWS verifier', () => {
  it("gives the time a key signed for itself, and refuses another key's, another kind, or one from the future", async () => {
    const key = await loadSigningKey();
    const other = await loadSigningKey();
    const jwk = key.publicJwk as unknown as PublicJwk;
    expect(await readHeartbeat(signHeartbeat(key, 'r1', NOW - 10), jwk, NOW)).toEqual({ at: NOW - 10 });
    expect(await readHeartbeat(signHeartbeat(other, 'r1', NOW), jwk, NOW)).toEqual({ refused: "the heartbeat is not signed by the peer's key" });
    expect(await readHeartbeat(signHeartbeat(key, 'r1', NOW + MAX_CLOCK_SKEW_MS + 1), jwk, NOW)).toEqual({
      refused: `the heartbeat is dated ${MAX_CLOCK_SKEW_MS + 1} ms in the future`,
    });
    const receipt = await new CompactSign(new TextEncoder().encode(JSON.stringify({ kid: key.kid, at: NOW })))
      .setProtectedHeader({ alg: 'ES256', typ: 'sigil-receipt', kid: key.kid })
      .sign(key.privateKey);
    expect(await readHeartbeat(receipt, jwk, NOW)).toEqual({ refused: 'the heartbeat is not a Sigil heartbeat' });
  });

  it('refuses a heartbeat whose header points at a key of its own (jwk), as receipts are refused', async () => {
    const key = await loadSigningKey();
    const jwk = key.publicJwk as unknown as PublicJwk;
    const beat = await new CompactSign(new TextEncoder().encode(JSON.stringify({ kid: key.kid, replica_id: 'r1', at: NOW })))
      .setProtectedHeader({ alg: 'ES256', typ: 'sigil-heartbeat', kid: key.kid, jwk: key.publicJwk })
      .sign(key.privateKey);
    expect(await readHeartbeat(beat, jwk, NOW)).toEqual({ refused: "the heartbeat is not signed by the peer's key" });
  });
});
