import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** Issue 11 item 8: one key's traffic cannot evict every other key's stored receipts. */
let engine: TestEngine;
let sigil: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'm', upstream: 'e' }],
    config: { receipts: { max_stored: 4, max_stored_per_key: 2 } },
  });
});

afterAll(async () => {
  await sigil.close();
  await engine.close();
});

async function receiptFor(key: string): Promise<string> {
  const res = await fetch(`${sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-service-receipt': 'true' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  });
  await res.text();
  return res.headers.get('x-service-receipt-id')!;
}

const stored = async (id: string, key: string) => (await fetch(`${sigil.url}/v1/receipts/${id}`, { headers: { authorization: `Bearer ${key}` } })).status;

describe('stored receipts', () => {
  it("are bounded per key: a busy key evicts its own oldest, never another key's", async () => {
    const quiet = await receiptFor(sigil.otherKey);
    const busy: string[] = [];
    // Five from one key against a total of four: with one FIFO for all keys, the quiet key's receipt went first.
    for (let i = 0; i < 5; i++) busy.push(await receiptFor(sigil.key));
    expect(await stored(quiet, sigil.otherKey)).toBe(200);
    expect(await Promise.all(busy.map((id) => stored(id, sigil.key)))).toEqual([404, 404, 404, 200, 200]);
  });
});
