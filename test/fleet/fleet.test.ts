import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { calculateJwkThumbprint, compactVerify, decodeProtectedHeader, importJWK, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addKey, hashApiKey } from '../../src/auth/keys-file.ts';
import { run as runKeysCli } from '../../src/cli/keys.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { waitFor } from '../support/wait-for.ts';
import { redisTestsSkipped, startTestRedis, type TestRedis } from './redis-server.ts';

const installed = !redisTestsSkipped();

const RPM = 6;
const KEY_TTL_S = 2;
const sha256 = (bytes: Buffer | string) => 'sha256:' + createHash('sha256').update(bytes).digest('hex');
/** The replicas' clock for their rate windows: the real one, unless a test holds it at one moment. */
let heldAt: number | undefined;
const windowClock = () => heldAt ?? Date.now();

let redis: TestRedis;
let engine: TestEngine;
let inspector: Redis;
const namespace = `fleet-test-${randomBytes(4).toString('hex')}`;
let replicas: TestSigil[] = [];
/** API keys, shared by every replica through copies of one keys file (as each machine would hold its own copy). */
const keys = { receipts: '', quota: '', revoked: '', other: '', outage: '' };

beforeAll(async () => {
  if (!installed) return;
  redis = await startTestRedis();
  engine = await startTestEngine({ modelNames: ['m1'] });
  inspector = new Redis(redis.url, { maxRetriesPerRequest: 1, lazyConnect: true, enableOfflineQueue: false, retryStrategy: () => 50 });
  inspector.on('error', () => undefined);
  await inspector.connect();
  const master = join(mkdtempSync(join(tmpdir(), 'sigil-fleet-')), 'api-keys');
  for (const name of Object.keys(keys) as Array<keyof typeof keys>) keys[name] = addKey(master, name).key;
  for (let i = 0; i < 3; i++) {
    const copy = `${master}.${i}`;
    copyFileSync(master, copy);
    replicas.push(
      await startTestSigil({
        upstreams: { main: { url: engine.baseUrl } },
        models: [{ id: 'm1' }],
        config: {
          brand: 'Acme',
          auth: { keys_file: copy },
          receipts: { retention_s: 60 },
          limits: { requests_per_minute: RPM },
          fleet: { redis_url: redis.url, replica_id: `replica-${'abc'[i]}`, namespace, key_ttl_s: KEY_TTL_S, admit_unattested_peers: true },
        },
        start: { now: windowClock },
      }),
    );
  }
});

afterAll(async () => {
  if (!installed) return;
  await Promise.all(replicas.map((r) => r.close(0)));
  inspector.disconnect();
  await engine.close();
  await redis.stop();
});

function post(replica: TestSigil, key: string, options: { stream?: boolean; receipt?: boolean } = {}): Promise<Response> {
  return fetch(`${replica.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...(options.receipt ? { 'x-acme-receipt': 'true' } : {}) },
    body: JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'hello fleet' }], stream: options.stream ?? false }),
  });
}

async function jwksOf(replica: TestSigil): Promise<{ keys: JWK[] }> {
  return (await (await fetch(`${replica.url}/v1/verify/jwks.json`)).json()) as { keys: JWK[] };
}

async function readyz(replica: TestSigil): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${replica.url}/readyz`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** What a client does: verify the JWS against each key of a JWKS until one succeeds. */
async function verifyWith(jwks: { keys: JWK[] }, jws: string): Promise<{ kid: string; claims: Record<string, unknown> }> {
  for (const jwk of jwks.keys) {
    try {
      const { payload } = await compactVerify(jws, await importJWK(jwk, 'ES256'), { algorithms: ['ES256'] });
      return { kid: jwk.kid!, claims: JSON.parse(new TextDecoder().decode(payload)) };
    } catch {
      continue;
    }
  }
  throw new Error('no key verifies the receipt');
}

async function eventually<T>(probe: () => Promise<T>, accept: (value: T) => boolean, timeoutMs: number): Promise<{ value: T; afterMs: number }> {
  const started = Date.now();
  const { value } = await waitFor(
    'the fleet to agree',
    async () => {
      const probed = await probe();
      return accept(probed) && { value: probed };
    },
    { timeoutMs },
  );
  return { value, afterMs: Date.now() - started };
}

const kids = () => replicas.map((r) => r.state.ctx.signingKey.kid).sort();

describe.skipIf(!installed)('a fleet of three replicas on one Redis', () => {
  it('serves the same JWKS on every replica: the keys of all three', async () => {
    await eventually(
      () => Promise.all(replicas.map(jwksOf)),
      (all) => all.every((j) => j.keys.length === 3),
      5000,
    );
    const [a, b, c] = await Promise.all(replicas.map(jwksOf));
    expect(a!.keys.map((k) => k.kid)).toEqual(kids());
    expect(b).toEqual(a);
    expect(c).toEqual(a);
    for (const jwk of a!.keys) {
      expect(Object.keys(jwk).sort()).toEqual(['alg', 'crv', 'kid', 'kty', 'use', 'x', 'y']);
      expect(await calculateJwkThumbprint(jwk, 'sha256')).toBe(jwk.kid);
    }
  });

  it('a receipt signed by replica A verifies against the JWKS fetched from replica B', async () => {
    const [a, b] = replicas as [TestSigil, TestSigil];
    const res = await post(a, keys.receipts, { receipt: true });
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(res.status).toBe(200);
    const jws = res.headers.get('x-acme-receipt')!;
    const { kid, claims } = await verifyWith(await jwksOf(b), jws);
    expect(kid).toBe(a.state.ctx.signingKey.kid);
    expect(decodeProtectedHeader(jws).kid).toBe(a.state.ctx.signingKey.kid);
    expect(kid).not.toBe(b.state.ctx.signingKey.kid);
    expect(claims.response_hash).toBe(sha256(bytes));
    expect(claims.receipt_id).toBe(res.headers.get('x-acme-receipt-id'));
  });

  it('GET /v1/receipts/{id} on replicas B and C returns the stream receipt replica A issued, to its key only', async () => {
    const [a, b, c] = replicas as [TestSigil, TestSigil, TestSigil];
    const res = await post(a, keys.receipts, { stream: true, receipt: true });
    const text = await res.text();
    const trailer = /\n: receipt (\S+)\n\n$/.exec(text);
    expect(trailer).not.toBeNull();
    const id = res.headers.get('x-acme-receipt-id')!;
    for (const replica of [b, c]) {
      const fetched = await fetch(`${replica.url}/v1/receipts/${id}`, { headers: { authorization: `Bearer ${keys.receipts}` } });
      expect(fetched.status).toBe(200);
      expect(await fetched.json()).toEqual({ id, receipt: trailer![1] });
    }
    const stranger = await fetch(`${b.url}/v1/receipts/${id}`, { headers: { authorization: `Bearer ${keys.other}` } });
    expect(stranger.status).toBe(404);
    expect(((await stranger.json()) as { error: { code: string } }).error.code).toBe('receipt_not_found');
  });

  it(`shares the per-key quota: ${RPM} requests a minute across the replicas, then 429 with Retry-After on any replica`, async () => {
    // Fixed one-minute windows: the replicas' window clock is held, so the requests cannot straddle a window's end.
    heldAt = Date.now();
    try {
      const statuses: number[] = [];
      for (let i = 0; i < RPM; i++) {
        const res = await post(replicas[i % 3]!, keys.quota);
        await res.arrayBuffer();
        statuses.push(res.status);
        expect(res.headers.get('x-ratelimit-remaining')).toBe(String(RPM - 1 - i));
      }
      expect(statuses).toEqual(Array(RPM).fill(200));
      for (const replica of replicas) {
        const refused = await post(replica, keys.quota);
        expect(refused.status).toBe(429);
        expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        expect(Number(refused.headers.get('retry-after'))).toBeLessThanOrEqual(60);
        expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('rate_limit_exceeded');
      }
      const other = await post(replicas[0]!, keys.other);
      await other.arrayBuffer();
      expect(other.status).toBe(200);
    } finally {
      heldAt = undefined;
    }
  });

  it('a key revoked with `sigil keys revoke` on replica A is refused by every replica within 5 seconds', async () => {
    const [a, b, c] = replicas as [TestSigil, TestSigil, TestSigil];
    for (const replica of replicas) expect((await post(replica, keys.revoked).then(async (r) => (await r.arrayBuffer(), r))).status).toBe(200);
    const started = Date.now();
    expect(await runKeysCli(['revoke', keys.revoked, '--config', join(a.dir, 'sigil.yaml')])).toBe(0);
    const statuses = async () => Promise.all([b, c].map(async (r) => (await post(r, keys.revoked)).status));
    await eventually(statuses, (s) => s.every((status) => status === 401), 5000);
    expect(Date.now() - started).toBeLessThan(5000);
    // B and C learnt it from Redis: their own keys files still list the key.
    const hash = hashApiKey(keys.revoked);
    for (const replica of [b, c]) expect(readFileSync(replica.state.ctx.config.auth.keys_file, 'utf8')).toContain(hash);
    expect(await inspector.zscore(`${namespace}:revoked-api-keys`, hash)).not.toBeNull();
    expect((await post(a, keys.revoked)).status).toBe(401);
    expect((await post(b, keys.receipts)).status).toBe(200);
  });

  it('a key planted in Redis without valid evidence for it is not served', async () => {
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const { kty, crv, x, y } = publicKey.export({ format: 'jwk' });
    const kid = await calculateJwkThumbprint({ kty: kty!, crv: crv!, x: x!, y: y! }, 'sha256');
    const attestation = {
      version: 2,
      tee: 'none',
      measurement: 'ff'.repeat(48),
      nonce: '00'.repeat(32),
      binding: { jwks: { keys: [{ kty, crv, x, y, kid }] } },
      report_data: '',
      evidence: null,
    };
    await inspector.set(
      `${namespace}:signing-key:${kid}`,
      JSON.stringify({ replica_id: 'intruder', kid, attestation, published_at: new Date().toISOString() }),
      'PX',
      60_000,
    );
    await inspector.zadd(`${namespace}:signing-keys`, Date.now(), kid);
    await inspector.publish(`${namespace}:members`, kid);
    await waitFor('the planted key refused', () =>
      replicas[0]!.logs.some((line) => line.includes(kid) && line.includes("is not this replica's nor one of fleet.trusted_measurements")),
    );
    for (const replica of replicas) expect((await jwksOf(replica)).keys.map((k) => k.kid)).toEqual(kids());
    expect(replicas[0]!.logs.some((line) => line.includes(kid) && line.includes("is not this replica's nor one of fleet.trusted_measurements"))).toBe(true);
  });

  it('a Redis that stops answering costs at most one command timeout, then chat runs on local state until it answers again', async () => {
    const [a] = replicas as [TestSigil];
    redis.pause();
    try {
      const started = Date.now();
      const took: number[] = [];
      for (let i = 0; i < 4; i++) {
        const t = Date.now();
        const res = await post(a, keys.outage, { receipt: true });
        await res.arrayBuffer();
        expect(res.status).toBe(200);
        took.push(Date.now() - t);
      }
      // command_timeout_ms is 250: the first request pays it once per Redis command, the others not at all.
      expect(took.slice(1).every((ms) => ms < 200)).toBe(true);
      expect(Date.now() - started).toBeLessThan(1500);
      expect((await readyz(a)).body.fleet).toBe('degraded');
    } finally {
      redis.resume();
    }
    await eventually(
      () => readyz(a),
      (r) => r.body.fleet === 'up',
      5000,
    );
  });

  describe('when Redis dies', () => {
    let jwksBefore: { keys: JWK[] };

    beforeAll(async () => {
      jwksBefore = await jwksOf(replicas[0]!);
      await redis.kill();
      await eventually(
        () => Promise.all(replicas.map(readyz)),
        (all) => all.every((r) => r.body.fleet === 'degraded'),
        5000,
      );
    });

    it('chat keeps working on every replica, without stalling, and receipts still verify', async () => {
      for (const replica of replicas) {
        const started = Date.now();
        const res = await post(replica, keys.outage, { receipt: true });
        await res.arrayBuffer();
        expect(res.status).toBe(200);
        expect(Date.now() - started).toBeLessThan(1000);
        await verifyWith(jwksBefore, res.headers.get('x-acme-receipt')!);
      }
    });

    it('/readyz answers 200 with fleet "degraded"', async () => {
      for (const replica of replicas) {
        const { status, body } = await readyz(replica);
        expect(status).toBe(200);
        expect(body).toEqual({ status: 'ready', keys_loaded: true, engines: { main: true }, fleet: 'degraded' });
      }
    });

    it('the JWKS keeps its last good view and revoked keys stay refused', async () => {
      // real clock: the view must outlast a key TTL of the replicas' clocks while Redis is down
      await new Promise((r) => setTimeout(r, KEY_TTL_S * 1000));
      for (const replica of replicas) {
        expect(await jwksOf(replica)).toEqual(jwksBefore);
        expect((await post(replica, keys.revoked)).status).toBe(401);
      }
    });

    it('receipts stay readable on the replica that issued them', async () => {
      const [a] = replicas as [TestSigil];
      const res = await post(a, keys.outage, { stream: true, receipt: true });
      const text = await res.text();
      const jws = /\n: receipt (\S+)\n\n$/.exec(text)![1];
      const id = res.headers.get('x-acme-receipt-id')!;
      const fetched = await fetch(`${a.url}/v1/receipts/${id}`, { headers: { authorization: `Bearer ${keys.outage}` } });
      expect(await fetched.json()).toEqual({ id, receipt: jws });
    });
  });

  describe('when Redis comes back (empty)', () => {
    beforeAll(async () => {
      await redis.start();
      await inspector.connect().catch(() => undefined);
      await eventually(
        () => Promise.all(replicas.map(readyz)),
        (all) => all.every((r) => r.body.fleet === 'up'),
        10_000,
      );
    });

    it('every replica republishes its key, and the revocations it knows', async () => {
      await eventually(
        () => inspector.zrange(`${namespace}:signing-keys`, 0, -1),
        (listed) => listed.length === 3,
        5000,
      );
      expect((await inspector.zrange(`${namespace}:signing-keys`, 0, -1)).sort()).toEqual(kids());
      await eventually(
        () => inspector.zrange(`${namespace}:revoked-api-keys`, 0, -1),
        (listed) => listed.includes(hashApiKey(keys.revoked)),
        5000,
      );
      for (const replica of replicas) expect((await jwksOf(replica)).keys.map((k) => k.kid)).toEqual(kids());
    });

    it('receipts and quotas are shared again', async () => {
      const [a, b] = replicas as [TestSigil, TestSigil];
      const res = await post(a, keys.receipts, { stream: true, receipt: true });
      const jws = /\n: receipt (\S+)\n\n$/.exec(await res.text())![1];
      const id = res.headers.get('x-acme-receipt-id')!;
      const fetched = await fetch(`${b.url}/v1/receipts/${id}`, { headers: { authorization: `Bearer ${keys.receipts}` } });
      expect(await fetched.json()).toEqual({ id, receipt: jws });
      const window = Math.floor(Date.now() / 60_000);
      expect(Number(await inspector.get(`${namespace}:window:rpm:${hashApiKey(keys.receipts)}:${window}`))).toBeGreaterThanOrEqual(1);
    });
  });

  it('a replica that leaves retires its key, which stays in the JWKS for the receipt retention window', async () => {
    const leaving = replicas[2]!;
    const kid = leaving.state.ctx.signingKey.kid;
    const all = kids();
    await leaving.close(0);
    replicas = replicas.slice(0, 2);
    const [seconds, micros] = await inspector.time();
    const redisNow = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    const score = Number(await inspector.zscore(`${namespace}:signing-keys`, kid));
    expect(score).toBeLessThanOrEqual(redisNow - KEY_TTL_S * 1000);
    // real clock: the retired key must still be served once its TTL has passed on Redis's clock
    await new Promise((r) => setTimeout(r, KEY_TTL_S * 1000 + 500));
    for (const replica of replicas) expect((await jwksOf(replica)).keys.map((k) => k.kid)).toEqual(all);
  });
});
