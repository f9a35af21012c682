import { describe, expect, it } from 'vitest';
import { InFlightRequests } from '../../src/http/in-flight.ts';

describe('the requests in flight a drain waits for', () => {
  it('settles at once, true, when none is in flight', async () => {
    const inFlight = new InFlightRequests();
    expect(await inFlight.settled(10_000)).toBe(true);
  });

  it('wakes the waiter when the last request ends, not before, without waiting for a timer', async () => {
    const inFlight = new InFlightRequests();
    inFlight.enter();
    inFlight.enter();
    let settled: boolean | undefined;
    const started = performance.now();
    const waiting = inFlight.settled(60_000).then((v) => (settled = v));
    inFlight.leave();
    await new Promise((r) => setImmediate(r));
    expect(settled).toBeUndefined();
    expect(inFlight.count).toBe(1);
    inFlight.leave();
    await waiting;
    expect(settled).toBe(true);
    expect(inFlight.count).toBe(0);
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('gives up with false once the timeout passes, and a later end wakes nobody twice', async () => {
    const inFlight = new InFlightRequests();
    inFlight.enter();
    const started = performance.now();
    expect(await inFlight.settled(50)).toBe(false);
    expect(performance.now() - started).toBeGreaterThanOrEqual(45);
    const second = inFlight.settled(60_000);
    inFlight.leave();
    expect(await second).toBe(true);
  });

  it('answers false at once for a timeout of zero with a request in flight', async () => {
    const inFlight = new InFlightRequests();
    inFlight.enter();
    expect(await inFlight.settled(0)).toBe(false);
  });
});
