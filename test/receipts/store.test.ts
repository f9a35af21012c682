import { describe, expect, it } from 'vitest';
import { MemoryReceiptStore } from '../../src/receipts/store.ts';

/** src/receipts/store.ts: bounded in time, in count, and in count per key, whatever the number of receipts that went through. */
const owner = (name: string) => ({ keyHash: name.repeat(64).slice(0, 64), secret: Buffer.alloc(32) });
const A = owner('a');
const B = owner('b');

async function held(store: MemoryReceiptStore, who: typeof A, ids: string[]): Promise<string[]> {
  const out: string[] = [];
  for (const id of ids) if ((await store.get(id, who)) !== undefined) out.push(id);
  return out;
}

describe('MemoryReceiptStore', () => {
  it("keeps each key's newest receipts over many thousands of evictions, and never another key's", async () => {
    const store = new MemoryReceiptStore({ retentionS: 3600, maxEntries: 1000, maxPerKey: 3 });
    const quiet = ['q0', 'q1'];
    for (const id of quiet) await store.put(id, B, `jws-${id}`);
    const busy = Array.from({ length: 5000 }, (_, i) => `b${i}`);
    for (const id of busy) await store.put(id, A, `jws-${id}`);
    expect(await held(store, A, busy)).toEqual(['b4997', 'b4998', 'b4999']);
    expect(await held(store, B, quiet)).toEqual(quiet);
    expect(await store.get('b4999', B)).toBeUndefined();
    expect(await store.get('b4999', A)).toBe('jws-b4999');
    expect(store.size).toBe(5);
  });

  it('evicts the oldest of all keys at the total bound, and expired receipts first', async () => {
    let now = 0;
    const store = new MemoryReceiptStore({ retentionS: 10, maxEntries: 4, maxPerKey: 4, now: () => now });
    for (let i = 0; i < 2500; i++) await store.put(`x${i}`, i % 2 === 0 ? A : B, 'jws');
    expect(await held(store, A, ['x2496', 'x2498'])).toEqual(['x2496', 'x2498']);
    expect(await held(store, B, ['x2497', 'x2499'])).toEqual(['x2497', 'x2499']);
    expect(await held(store, A, ['x2494'])).toEqual([]);
    now = 10_000;
    await store.put('late', A, 'jws');
    expect(store.size).toBe(1);
    expect(await store.get('late', A)).toBe('jws');
    // A key whose receipts all went can store again.
    for (let i = 0; i < 2000; i++) await store.put(`y${i}`, B, 'jws');
    expect(await held(store, B, ['y1996', 'y1997', 'y1998', 'y1999'])).toEqual(['y1996', 'y1997', 'y1998', 'y1999']);
    expect(await store.get('late', A)).toBeUndefined();
  });
});
