import { randomBytes } from 'node:crypto';
import { copyFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addKey, hashApiKey } from '../../src/auth/keys-file.ts';
import { run as runKeysCli } from '../../src/cli/keys.ts';
import { redisTestsSkipped, startTestRedis, type TestRedis } from '../fleet/redis-server.ts';
import { startSigilProcess, type SigilProcess } from '../support/sigil-process.ts';
import { once } from './fresh-connection.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { waitFor } from '../support/wait-for.ts';

const installed = !redisTestsSkipped();
const namespace = `workers-fleet-${randomBytes(4).toString('hex')}`;

let redis: TestRedis;
let engine: TestEngine;
/** Replica A: `sigil serve` with two workers; its primary holds the fleet connection. */
let a: SigilProcess;
/** Replica B: `sigil serve` as one process, with the same configuration but for its name. */
let b: SigilProcess;
let revokedKey: string;

const chat = (url: string, key: string, headers: Record<string, string> = {}) =>
  once(url, '/v1/chat/completions', {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true }),
  });

const fetchReceipt = (url: string, key: string, id: string) => once(url, `/v1/receipts/${id}`, { headers: { authorization: `Bearer ${key}` } });

const kidOf = (replica: SigilProcess) => replica.logs.find((l) => l.msg === 'sigil listening')!.kid as string;

/** The worker that served each logged request to `route`, in order. */
const servedBy = (route: string) => a.logs.filter((l) => l.msg === 'request' && l.route === route).map((l) => l.worker);

beforeAll(async () => {
  if (!installed) return;
  redis = await startTestRedis();
  engine = await startTestEngine({ modelNames: ['m'] });
  const fleet = (replica: string) => ({ redis_url: redis.url, namespace, replica_id: replica, key_ttl_s: 5, admit_unattested_peers: true });
  a = await startSigilProcess(engine.baseUrl, { workers: 2, receipts: { retention_s: 60 }, fleet: fleet('replica-a') });
  revokedKey = addKey(join(a.dir, 'keys'), 'to-revoke').key;
  a.child.kill('SIGHUP');
  await waitFor(
    'the revoked key served by both workers before the revocation',
    async () => (await chat(a.url, revokedKey)).status === 200 && (await chat(a.url, revokedKey)).status === 200,
    { timeoutMs: 20_000 },
  );
  b = await startSigilProcess(engine.baseUrl, { workers: 1, receipts: { retention_s: 60 }, fleet: fleet('replica-b') });
  // B reads its own copy of A's keys file, as each machine of a fleet holds its own.
  copyFileSync(join(a.dir, 'keys'), join(b.dir, 'keys'));
  b.child.kill('SIGHUP');
  await waitFor('the key of A accepted by replica B', async () => (await chat(b.url, a.key)).status === 200, { timeoutMs: 20_000 });
}, 120_000);

afterAll(async () => {
  if (!installed) return;
  for (const replica of [a, b]) {
    if (replica === undefined) continue;
    replica.child.kill('SIGTERM');
    await replica.exited;
  }
  await engine?.close();
  await redis?.stop();
});

describe.skipIf(!installed)('sigil serve with workers: 2 in fleet mode (real Redis)', { timeout: 120_000 }, () => {
  it('starts: the primary joins the fleet once, and /readyz says the fleet is up from each worker', async () => {
    expect(a.logs.filter((l) => l.msg === 'fleet: joined')).toHaveLength(1);
    expect(a.logs.find((l) => l.msg === 'sigil listening')).toMatchObject({ workers: 2 });
    for (let i = 0; i < 2; i++) expect(JSON.parse((await once(a.url, '/readyz')).body)).toMatchObject({ status: 'ready', fleet: 'up' });
  });

  it('serves a receipt made through one worker through the other worker and through replica B, and one made on B through both workers', async () => {
    const made = await chat(a.url, a.key, { 'x-service-receipt': 'true' });
    expect(made.status).toBe(200);
    const id = made.headers['x-service-receipt-id'] as string;
    const receipt = /\n: receipt (\S+)\n\n$/.exec(made.body)![1];
    for (let i = 0; i < 2; i++) {
      const fetched = await fetchReceipt(a.url, a.key, id);
      expect(fetched.status).toBe(200);
      expect(JSON.parse(fetched.body)).toEqual({ id, receipt });
    }
    // B serves it once it admitted A's key (it reads the receipt from Redis and checks A's signature).
    await waitFor('the receipt fetched through B', async () => (await fetchReceipt(b.url, a.key, id)).status === 200, { timeoutMs: 20_000 });
    expect(JSON.parse((await fetchReceipt(b.url, a.key, id)).body)).toEqual({ id, receipt });

    const onB = await chat(b.url, a.key, { 'x-service-receipt': 'true' });
    const idOnB = onB.headers['x-service-receipt-id'] as string;
    const receiptOnB = /\n: receipt (\S+)\n\n$/.exec(onB.body)![1];
    await waitFor('the receipt made on B fetched through A', async () => (await fetchReceipt(a.url, a.key, idOnB)).status === 200, { timeoutMs: 20_000 });
    for (let i = 0; i < 2; i++) expect(JSON.parse((await fetchReceipt(a.url, a.key, idOnB)).body)).toEqual({ id: idOnB, receipt: receiptOnB });
    // Both workers answered receipt fetches.
    await waitFor('both workers serving receipts', async () => new Set(servedBy('/v1/receipts/{id}')).size === 2, { timeoutMs: 10_000 });
    // The JWKS every worker serves is the fleet's: A's key and B's.
    for (let i = 0; i < 2; i++) {
      const kids = (JSON.parse((await once(a.url, '/v1/verify/jwks.json')).body) as { keys: Array<{ kid: string }> }).keys.map((k) => k.kid).sort();
      expect(kids).toEqual([kidOf(a), kidOf(b)].sort());
    }
  });

  it('refuses, on both workers, a key revoked on replica B while it is still in A’s keys file', async () => {
    expect(await runKeysCli(['revoke', revokedKey, '--config', join(b.dir, 'sigil.yaml')])).toBe(0);
    expect(readFileSync(join(a.dir, 'keys'), 'utf8')).toContain(hashApiKey(revokedKey));
    await waitFor('the key revoked on B refused by A', async () => (await chat(a.url, revokedKey)).status === 401, { timeoutMs: 10_000 });
    for (let i = 0; i < 4; i++) expect((await chat(a.url, revokedKey)).status).toBe(401);
    expect((await chat(a.url, a.key)).status).toBe(200);
  });
});
