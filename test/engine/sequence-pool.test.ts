import { describe, expect, it } from 'vitest';
import { EngineHttpError } from '../../packages/engine/src/server/errors.ts';
import { SequencePool } from '../../packages/engine/src/server/sequence-pool.ts';

const never = new AbortController().signal;

describe('SequencePool', () => {
  it('hands out free items, then queues callers in order up to its limit, then refuses with a 429', async () => {
    const pool = new SequencePool(['s0'], 2);
    expect(await pool.acquire(never)).toBe('s0');
    const order: string[] = [];
    const first = pool.acquire(never).then((s) => order.push(`first:${s}`));
    const second = pool.acquire(never).then((s) => order.push(`second:${s}`));
    const third = await pool.acquire(never).catch((e: unknown) => e);
    expect(third).toBeInstanceOf(EngineHttpError);
    expect((third as EngineHttpError).status).toBe(429);
    pool.release('s0');
    await first;
    pool.release('s0');
    await second;
    expect(order).toEqual(['first:s0', 'second:s0']);
  });

  it('drops a waiter whose signal aborts, so a release goes to the next one', async () => {
    const pool = new SequencePool(['s0'], 2);
    await pool.acquire(never);
    const aborter = new AbortController();
    const gone = pool.acquire(aborter.signal).catch(() => 'aborted');
    const next = pool.acquire(never);
    aborter.abort();
    expect(await gone).toBe('aborted');
    expect(pool.waitingCount).toBe(1);
    pool.release('s0');
    expect(await next).toBe('s0');
  });
});
