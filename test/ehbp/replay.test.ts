import { createHash, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Identity } from 'ehbp';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisTestsSkipped, startTestRedis, type TestRedis } from '../fleet/redis-server.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** docs/ehbp.md, "Replays": a captured sealed request sent again never reaches the engine. */
let engine: TestEngine;
let sigil: TestSigil;
let tiny: TestSigil;
/** The clock of `tiny`'s replay window, moved by the test. */
let tinyNow = Date.now();

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  [sigil, tiny] = await Promise.all([
    startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }] }),
    startTestSigil({
      upstreams: { e: { url: engine.baseUrl } },
      models: [{ id: 'm' }],
      config: { ehbp: { replay_window_s: 1, replay_max_entries: 2 } },
      start: { now: () => tinyNow },
    }),
  ]);
});

afterAll(async () => {
  await Promise.all([sigil.close(0), tiny.close(0)]);
  await engine.close();
});

const enginePosts = () => engine.requests.filter((r) => r.method === 'POST').length;

/** One sealed request, captured as an observer would: its headers and sealed bytes, sendable again to any replica. */
async function capture(target: TestSigil, key = target.key) {
  const keyConfig = new Uint8Array(await (await fetch(`${target.url}/.well-known/hpke-keys`)).arrayBuffer());
  const identity = await Identity.unmarshalPublicConfig(keyConfig);
  const { request, context } = await identity.encryptRequestWithContext(
    new Request(`${target.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'transfer the funds' }] }),
    }),
  );
  const body = Buffer.from(await request.arrayBuffer());
  const headers = Object.fromEntries(request.headers.entries());
  const send = (url = target.url) => fetch(`${url}/v1/chat/completions`, { method: 'POST', headers, body });
  return { identity, context: context!, send, enc: request.headers.get('ehbp-encapsulated-key')! };
}

describe('a replayed sealed request', () => {
  it('is refused with 409 ehbp_replayed, sealed to the original client, and the engine runs once', async () => {
    const captured = await capture(sigil);
    const first = await captured.send();
    expect(first.status).toBe(200);
    await first.arrayBuffer();
    const before = enginePosts();
    const again = await captured.send();
    expect(again.status).toBe(409);
    // The replayer cannot read the answer; the client that sealed the request can.
    const opened = await captured.identity.decryptResponseWithContext(again, captured.context);
    expect(await opened.json()).toEqual({
      error: {
        message: 'This encrypted request was already received: seal every request afresh.',
        type: 'invalid_request_error',
        param: null,
        code: 'ehbp_replayed',
      },
    });
    expect(enginePosts()).toBe(before);
  });

  it('is remembered for ehbp.replay_window_s; with ehbp.replay_max_entries remembered, new sealed requests wait (503) rather than forget one early', async () => {
    const a = await capture(tiny);
    const b = await capture(tiny);
    const c = await capture(tiny);
    expect((await a.send()).status).toBe(200);
    expect((await b.send()).status).toBe(200);
    const before = enginePosts();
    const full = await c.send();
    expect(full.status).toBe(503);
    expect(full.headers.get('retry-after')).toBe('5');
    expect(((await (await c.identity.decryptResponseWithContext(full, c.context)).json()) as { error: { code: string } }).error.code).toBe(
      'ehbp_replay_window_full',
    );
    expect((await a.send()).status).toBe(409);
    expect(enginePosts()).toBe(before);
    tinyNow += 1001;
    const later = await (await capture(tiny)).send();
    expect(later.status).toBe(200);
    await later.arrayBuffer();
  });
});

describe.skipIf(redisTestsSkipped())('in fleet mode', () => {
  let redis: TestRedis;
  let replicas: TestSigil[];
  const namespace = `replay-${randomBytes(4).toString('hex')}`;
  beforeAll(async () => {
    redis = await startTestRedis();
    replicas = [];
    const start = (id: string, auth?: { keys_file: string }) =>
      startTestSigil({
        upstreams: { e: { url: engine.baseUrl } },
        models: [{ id: 'm' }],
        config: { fleet: { redis_url: redis.url, namespace, replica_id: id }, ...(auth ? { auth } : {}) },
      });
    const b = await start('b');
    replicas = [await start('a', { keys_file: join(b.dir, 'api-keys') }), b];
  });
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.close(0)));
    await redis.stop();
  });

  it('is refused by every replica: 409 where it was sealed, 422 elsewhere (each replica holds its own HPKE key), and the window is kept in Redis', async () => {
    const [a, b] = replicas as [TestSigil, TestSigil];
    const captured = await capture(b);
    const first = await captured.send(b.url);
    expect(first.status).toBe(200);
    await first.arrayBuffer();
    const before = enginePosts();
    expect((await captured.send(b.url)).status).toBe(409);
    expect((await captured.send(a.url)).status).toBe(422);
    expect(enginePosts()).toBe(before);
    const inspector = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      await inspector.connect();
      const seen = await inspector.keys(`${namespace}:ehbp-seen:*`);
      expect(seen).toHaveLength(1);
      expect(seen[0]).toBe(`${namespace}:ehbp-seen:${createHash('sha256').update(Buffer.from(captured.enc, 'hex')).digest('hex')}`);
      const ttl = await inspector.pttl(seen[0]!);
      expect(ttl).toBeGreaterThan(3_500_000);
      expect(ttl).toBeLessThanOrEqual(3_600_000);
    } finally {
      inspector.disconnect();
    }
  });
});
