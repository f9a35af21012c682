import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addKey, hashApiKey } from '../../src/auth/keys-file.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { redisTestsSkipped, startTestRedis, type TestRedis } from './redis-server.ts';

/** deploy/README.md, "What Redis can and cannot do to you": a Redis writer against one replica, on a real redis-server. */
const installed = !redisTestsSkipped();
const RPM = 3;
/** The replica's clock for its rate windows: the real one until a test holds it (holdWindowClock). */
let heldAt: number | undefined;

let redis: TestRedis;
let engine: TestEngine;
let writer: Redis;
let sigil: TestSigil;
const namespace = `writer-test-${randomBytes(4).toString('hex')}`;
const keys: Record<string, string> = {};
const KEY_NAMES = ['negative', 'fraction', 'text', 'huge', 'deleted', 'slots', 'exhausted', 'private'];

beforeAll(async () => {
  if (!installed) return;
  redis = await startTestRedis();
  engine = await startTestEngine({ modelNames: ['m1'] });
  writer = new Redis(redis.url, { maxRetriesPerRequest: 1, lazyConnect: true, enableOfflineQueue: false });
  writer.on('error', () => undefined);
  await writer.connect();
  const keysFile = join(mkdtempSync(join(tmpdir(), 'sigil-writer-')), 'api-keys');
  for (const name of KEY_NAMES) keys[name] = addKey(keysFile, name).key;
  sigil = await startTestSigil({
    upstreams: { main: { url: engine.baseUrl } },
    models: [{ id: 'm1' }],
    config: {
      auth: { keys_file: keysFile },
      limits: { requests_per_minute: RPM, max_concurrent_per_key: 1 },
      fleet: { redis_url: redis.url, replica_id: 'replica-a', namespace },
    },
    start: { now: () => heldAt ?? Date.now() },
  });
});

afterAll(async () => {
  if (!installed) return;
  await sigil.close(0);
  writer.disconnect();
  await engine.close();
  await redis.stop();
});

function post(key: string, content = 'hello fleet', stream = false): Promise<Response> {
  return fetch(`${sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-service-receipt': 'true' },
    body: JSON.stringify({ model: 'm1', messages: [{ role: 'user', content }], stream }),
  });
}

async function status(key: string): Promise<number> {
  const res = await post(key);
  await res.arrayBuffer();
  return res.status;
}

/** The Redis key of this minute's request counter for `apiKey`, once a request has made it. */
async function rpmCounter(apiKey: string): Promise<string> {
  const found = await writer.keys(`${namespace}:window:rpm:${hashApiKey(apiKey)}:*`);
  expect(found).toHaveLength(1);
  return found[0]!;
}

/** Fixed one-minute windows: a test that counts within one holds the replica's window clock, so it cannot straddle the window's end. */
function holdWindowClock(): void {
  heldAt = Date.now();
}

describe.skipIf(!installed)('what a Redis writer cannot do', () => {
  it.each([
    ['negative', '-1000000'],
    ['fraction', '1.5'],
    ['text', 'lots'],
    ['huge', '99999999999999999999999'],
  ])('lift a quota by writing a counter that is not a count (%s): the key is refused as exhausted, and the value is logged as refused', async (name, value) => {
    holdWindowClock();
    expect(await status(keys[name]!)).toBe(200);
    const counter = await rpmCounter(keys[name]!);
    await writer.set(counter, value, 'KEEPTTL');
    const from = sigil.logs.length;
    const refused = await post(keys[name]!);
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('rate_limit_exceeded');
    expect(await status(keys[name]!)).toBe(429);
    const logged = sigil.logs.slice(from).filter((line) => line.includes('fleet: a limit counter in Redis is not a non-negative integer'));
    expect(logged.length).toBeGreaterThan(0);
    // The counter is named by its kind, never by the API key's hash.
    expect(logged.join('\n')).not.toContain(hashApiKey(keys[name]!));
  });

  it("lift a key's request quota on a replica by deleting its counter: the replica's own count still refuses it", async () => {
    holdWindowClock();
    for (let i = 0; i < RPM; i++) expect(await status(keys.deleted!)).toBe(200);
    expect(await status(keys.deleted!)).toBe(429);
    await writer.del(await rpmCounter(keys.deleted!));
    expect(await status(keys.deleted!)).toBe(429);
    expect(await status(keys.deleted!)).toBe(429);
  });

  it("lift a key's concurrency limit on a replica by deleting its slots: the replica's own count still refuses a second stream", async () => {
    engine.behaviour = { chunkDelayMs: 300 };
    try {
      const first = await post(keys.slots!, 'hold a slot', true);
      expect(first.status).toBe(200);
      const slots = `${namespace}:slots:conc:${hashApiKey(keys.slots!)}`;
      expect(await writer.zcard(slots)).toBe(1);
      await writer.del(slots);
      const second = await post(keys.slots!);
      expect(second.status).toBe(429);
      await second.arrayBuffer();
      await first.text();
    } finally {
      engine.behaviour = {};
    }
  });

  it('read a prompt or a completion: nothing a client sent or received is in Redis', async () => {
    const prompt = `a private question ${randomBytes(6).toString('hex')}`;
    const res = await post(keys.private!, prompt);
    const answer = (await res.json()) as { choices: Array<{ message: { content: string } }> };
    expect(res.status).toBe(200);
    const everything: string[] = [];
    for (const key of await writer.keys(`${namespace}:*`)) {
      const type = await writer.type(key);
      if (type === 'string') everything.push((await writer.getBuffer(key))!.toString('latin1'));
      else if (type === 'hash') everything.push(JSON.stringify(await writer.hgetall(key)));
      else if (type === 'zset') everything.push((await writer.zrange(key, 0, -1)).join(' '));
    }
    const dump = everything.join('\n');
    expect(dump).not.toContain(prompt);
    expect(dump).not.toContain(answer.choices[0]!.message.content);
    expect(dump).not.toContain(keys.private!);
  });
});

describe.skipIf(!installed)('what a Redis writer can do', () => {
  it("exhaust a key's quota by raising its counter: the key is refused until the window ends", async () => {
    holdWindowClock();
    expect(await status(keys.exhausted!)).toBe(200);
    await writer.set(await rpmCounter(keys.exhausted!), '1000', 'KEEPTTL');
    expect(await status(keys.exhausted!)).toBe(429);
  });
});
