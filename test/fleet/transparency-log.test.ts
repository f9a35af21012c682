import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { redisTestsSkipped, startTestRedis, type TestRedis } from './redis-server.ts';
import { attestedLog } from '../support/transparency-log.ts';
import { fetchCheckpoint, verifyReceiptInLog, type TrustedLog } from '../../src/verify/tlog/log-client.ts';
import { waitFor } from '../support/wait-for.ts';

const installed = !redisTestsSkipped();
let redis: TestRedis;
let engine: TestEngine;
const replicas: TestSigil[] = [];
const namespace = `tlog-fleet-${randomBytes(4).toString('hex')}`;

beforeAll(async () => {
  if (!installed) return;
  redis = await startTestRedis();
  engine = await startTestEngine({ modelNames: ['m1'] });
  for (const name of ['a', 'b']) {
    replicas.push(
      await startTestSigil({
        upstreams: { main: { url: engine.baseUrl } },
        models: [{ id: 'm1' }],
        config: {
          brand: 'Acme',
          fleet: { redis_url: redis.url, replica_id: `replica-${name}`, namespace, admit_unattested_peers: true },
          transparency_log: { dir: mkdtempSync(join(tmpdir(), `sigil-tlog-${name}-`)), batch_ms: 50 },
        },
      }),
    );
  }
});

afterAll(async () => {
  if (!installed) return;
  await Promise.all(replicas.map((r) => r.close(0)));
  await engine.close();
  await redis.stop();
});

const logOf = async (s: TestSigil): Promise<TrustedLog> => (await attestedLog(s.url)).log;

describe.skipIf(!installed)('fleet mode: one transparency log per replica', () => {
  it('gives each replica its own origin and key, bound in its own attestation', async () => {
    const [a, b] = await Promise.all(replicas.map(logOf));
    expect(a!.origin).not.toBe(b!.origin);
    expect(a!.key.publicKey.equals(b!.key.publicKey)).toBe(false);
  });

  it("logs a receipt in the log of the replica that signed it, and only there; the fleet still serves each replica's receipt key", async () => {
    const [a, b] = replicas as [TestSigil, TestSigil];
    const res = await fetch(`${a.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json', 'x-acme-receipt': 'true' },
      body: JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'which log?' }] }),
    });
    expect(res.status).toBe(200);
    const jws = res.headers.get('x-acme-receipt')!;
    const logA = await logOf(a);
    await waitFor('the receipt in the log of A', async () => (await fetchCheckpoint(logA)).size >= 1);
    expect((await verifyReceiptInLog(logA, jws, { index: Number(res.headers.get('x-acme-log-index')) })).index).toBe(0);
    await expect(verifyReceiptInLog(await logOf(b), jws, { index: 0 })).rejects.toThrow(
      /tree of 0 entries has no leaf at index 0: the receipt is not logged there/,
    );
    // Peers admit each other (their bindings declare the log key's origin too): B's JWKS comes to hold A's receipt key.
    await waitFor(
      'the key of A in the JWKS of B',
      async () => ((await (await fetch(`${b.url}/v1/verify/jwks.json`)).json()) as { keys: unknown[] }).keys.length === 2,
    );
  });
});
