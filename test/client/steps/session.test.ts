import { afterEach, describe, expect, it } from 'vitest';
import type { Agent } from 'undici';
import type { Attested } from '../../../src/client/attest.ts';
import { AttestationError } from '../../../src/client/attestation-error.ts';
import { AttestedSession } from '../../../src/client/session.ts';

/** The attested client's state (src/client/session.ts) with a verifier that answers what each test says, and a clock it moves. */
const HOUR = 60 * 60 * 1000;
let clock = new Date('2026-01-01T00:00:00Z');
const now = () => clock;
const advance = (ms: number) => (clock = new Date(clock.getTime() + ms));
const sessions: AttestedSession[] = [];
afterEach(async () => {
  for (const s of sessions.splice(0)) await s.close();
  clock = new Date('2026-01-01T00:00:00Z');
});

/** A verdict made now, naming a TLS key, and expiring when `expiresAt` says. */
const verdict = (tls: string | null, expiresAt?: Date): Attested =>
  ({ at: now(), tlsSpkiSha256: tls, hpkeKeyConfig: null, checks: [], ...(expiresAt === undefined ? {} : { expiresAt }) }) as unknown as Attested;

/** A verifier that answers each call with the next of `answers` (a verdict or an error), counting the calls. */
function verifier(...answers: Array<(() => Attested) | Error>) {
  const calls = { count: 0 };
  const verify = async () => {
    const answer = answers[Math.min(calls.count++, answers.length - 1)]!;
    if (answer instanceof Error) throw answer;
    return answer();
  };
  return { verify, calls };
}

async function start(verify: () => Promise<Attested>, reattestEveryMs = HOUR) {
  const session = await AttestedSession.start({ verify, reattestEveryMs, now });
  sessions.push(session);
  return session;
}

describe('AttestedSession: one verdict at a time, renewed on a schedule', () => {
  it('hands the verdict over while it is younger than the interval, and renews it once it is due', async () => {
    const first = verdict(null);
    const { verify, calls } = verifier(
      () => first,
      () => verdict(null),
    );
    const session = await start(verify);
    expect(session.renewal).toEqual({ attestedAt: new Date('2026-01-01T00:00:00Z'), dueAt: new Date('2026-01-01T01:00:00Z') });
    advance(HOUR - 1);
    expect(await session.current()).toBe(first);
    expect(calls.count).toBe(1);
    advance(1);
    const renewed = await session.current();
    expect(renewed).not.toBe(first);
    expect(calls.count).toBe(2);
    expect(session.renewal).toEqual({ attestedAt: new Date('2026-01-01T01:00:00Z'), dueAt: new Date('2026-01-01T02:00:00Z') });
  });

  it('is due before the interval when collateral the verdict used expires sooner', async () => {
    const { verify } = verifier(() => verdict(null, new Date('2026-01-01T00:20:00Z')));
    const session = await start(verify);
    expect(session.dueAt).toEqual(new Date('2026-01-01T00:20:00Z'));
  });

  it('makes requests at the expiry wait on one re-attestation, not one each', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const { verify, calls } = verifier(
      () => verdict(null),
      () => verdict(null),
    );
    const session = await start(async () => {
      if (calls.count === 1) await held;
      return verify();
    });
    advance(HOUR);
    const waiting = [session.current(), session.current(), session.current()];
    release();
    const [a, b, c] = await Promise.all(waiting);
    expect(a).toBe(b);
    expect(b).toBe(c);
    expect(calls.count).toBe(2);
  });

  it('refuses every request with the failure of a re-attestation until one succeeds, each request trying again', async () => {
    const refused = new AttestationError('the policy changed', [{ name: 'attestation.policy', ok: false, detail: 'changed' }]);
    const { verify, calls } = verifier(
      () => verdict(null),
      refused,
      refused,
      () => verdict(null),
    );
    const session = await start(verify);
    advance(HOUR);
    await expect(session.current()).rejects.toBe(refused);
    expect(session.renewal.failed).toEqual({ at: new Date('2026-01-01T01:00:00Z'), error: refused });
    await expect(session.current()).rejects.toBe(refused);
    const recovered = await session.current();
    expect(recovered.at).toEqual(new Date('2026-01-01T01:00:00Z'));
    expect(session.renewal.failed).toBeUndefined();
    expect(calls.count).toBe(4);
  });

  it('swaps its connections when the TLS key changes, so only the current verdict key is admitted', async () => {
    const { verify } = verifier(
      () => verdict('a'.repeat(64)),
      () => verdict('b'.repeat(64)),
      () => verdict('b'.repeat(64)),
    );
    const session = await start(verify);
    const first = session.agent;
    await session.reattest();
    const second = session.agent;
    expect(second).not.toBe(first);
    expect((first as Agent).closed).toBe(true);
    await session.reattest();
    expect(session.agent).toBe(second);
  });
});
