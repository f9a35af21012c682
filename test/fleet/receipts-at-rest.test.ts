import { randomBytes, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { Identity } from 'ehbp';
import { Redis } from 'ioredis';
import { hashApiKey } from '../../src/auth/keys-file.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { splitSealedJson } from '../../src/protocol/sealed-receipt.ts';
import { KeyRing } from '../../src/auth/bearer.ts';
import { fleetKeys } from '../../src/fleet/redis-keys.ts';
import { receiptIndex, sealReceipt } from '../../src/receipts/sealed-at-rest.ts';
import { createJwsSigner } from '../../src/receipts/signer.ts';
import { loadSigningKey } from '../../src/receipts/signing-key.ts';
import { splitReceiptStream } from '../../src/verify/index.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { redisTestsSkipped, startTestRedis, type TestRedis } from './redis-server.ts';

/** docs/receipts.md, "Receipts at rest": whoever runs Redis reads no receipt, nor whose it is. */
const MODEL = 'at-rest-model-z9';
const PROVIDER = 'at-rest-provider-w4';

let redis: TestRedis;
let engine: TestEngine;
let a: TestSigil;
let b: TestSigil;
const namespace = `at-rest-${randomBytes(4).toString('hex')}`;

beforeAll(async () => {
  redis = await startTestRedis();
  engine = await startTestEngine({ modelNames: [MODEL] });
  const start = (id: string, auth?: { keys_file: string }) =>
    startTestSigil({
      upstreams: { e: { url: engine.baseUrl } },
      models: [{ id: MODEL, provider: PROVIDER }],
      config: { fleet: { redis_url: redis.url, namespace, replica_id: id, admit_unattested_peers: true }, ...(auth ? { auth } : {}) },
    });
  a = await start('a');
  b = await start('b', { keys_file: join(a.dir, 'api-keys') });
}, 30_000);

afterAll(async () => {
  await Promise.all([a?.close(0), b?.close(0)]);
  await engine?.close();
  await redis?.stop();
});

/** Every key and every value Redis holds, as text: what its operator can read. */
async function dump(url: string): Promise<string> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await client.connect();
  try {
    const out: string[] = [];
    for (const key of await client.keys('*')) {
      out.push(key);
      const type = await client.type(key);
      if (type === 'string') out.push((await client.get(key)) ?? '');
      else if (type === 'zset') out.push(...(await client.zrange(key, 0, -1, 'WITHSCORES')));
      else if (type === 'hash') out.push(JSON.stringify(await client.hgetall(key)));
      else if (type === 'set') out.push(...(await client.smembers(key)));
      else if (type === 'list') out.push(...(await client.lrange(key, 0, -1)));
    }
    return out.join('\n');
  } finally {
    client.disconnect();
  }
}

async function sealedChat(target: TestSigil, stream: boolean) {
  const keyConfig = new Uint8Array(await (await fetch(`${target.url}/.well-known/hpke-keys`)).arrayBuffer());
  const identity = await Identity.unmarshalPublicConfig(keyConfig);
  const { request, context } = await identity.encryptRequestWithContext(
    new Request(`${target.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json', 'x-service-receipt': 'true' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'a private question' }], stream }),
    }),
  );
  const response = await fetch(request);
  expect(response.status).toBe(200);
  const opened = new Uint8Array(await (await identity.decryptResponseWithContext(response, context!)).arrayBuffer());
  const split = stream ? splitReceiptStream(opened) : splitSealedJson(opened)!;
  return { jws: split.receipt, claims: JSON.parse(Buffer.from(split.receipt.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, string> };
}

describe.skipIf(redisTestsSkipped())('receipts at rest in Redis', () => {
  it('a dump after sealed exchanges holds no model, nonce, completion id, receipt id or plaintext hash; GET /v1/receipts/{id} still answers the owner from every replica', async () => {
    const exchanges = [await sealedChat(a, false), await sealedChat(a, true), await sealedChat(b, false)];
    const text = await dump(redis.url);
    expect(text).toContain(`${namespace}:receipt:`);
    for (const { jws, claims } of exchanges) {
      for (const value of [
        claims.nonce!,
        claims.completion_id!,
        claims.receipt_id!,
        claims.request_hash!.slice(7),
        claims.response_hash!.slice(7),
        jws.split('.')[1]!,
      ]) {
        expect(value.length).toBeGreaterThan(8);
        expect(text).not.toContain(value);
      }
    }
    // Each replica's published attestation (its `signing-key:` record, what GET /v1/attestation serves) carries its
    // manifest, which lists the catalogue's model ids as /v1/models does; nothing else may name the model.
    const published = new RegExp(`^${namespace}:signing-key:.*\\n.*$`, 'gm');
    expect(text.match(published)).toHaveLength(2);
    const atRest = text.replace(published, '');
    expect(atRest).not.toContain(MODEL);
    expect(atRest).not.toContain(PROVIDER);
    // Not even whose receipts they are: no key hash sits beside them.
    expect(text).not.toContain(hashApiKey(a.key).slice(0, 12));

    for (const { jws, claims } of exchanges) {
      for (const replica of [a, b]) {
        const got = await fetch(`${replica.url}/v1/receipts/${claims.receipt_id}`, { headers: { authorization: `Bearer ${a.key}` } });
        expect(got.status).toBe(200);
        expect(await got.json()).toEqual({ id: claims.receipt_id, receipt: jws });
        const other = await fetch(`${replica.url}/v1/receipts/${claims.receipt_id}`, { headers: { authorization: `Bearer ${a.otherKey}` } });
        expect(other.status).toBe(404);
        await other.arrayBuffer();
      }
    }
  });

  /** Writes `jws` into Redis exactly where the owner's receipt `receiptId` would rest, sealed under the owner's key. */
  async function plant(receiptId: string, jws: string): Promise<void> {
    const owner = new KeyRing([{ hash: hashApiKey(a.key), created: '', label: '' }]).authenticate({ authorization: `Bearer ${a.key}` });
    const index = receiptIndex(owner, receiptId);
    const client = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await client.connect();
    try {
      await client.set(fleetKeys(namespace).receiptPrefix + index, sealReceipt(owner, index, jws), 'PX', 60_000);
    } finally {
      client.disconnect();
    }
  }

  async function refusedFromRedis(receiptId: string): Promise<void> {
    const logsBefore = b.logs.length;
    const got = await fetch(`${b.url}/v1/receipts/${receiptId}`, { headers: { authorization: `Bearer ${a.key}` } });
    expect(got.status).toBe(500);
    expect(await got.json()).toEqual({
      error: {
        message: 'The stored receipt failed its check (its id, or its signature by a key this service admits) and is not served.',
        type: 'server_error',
        param: null,
        code: 'stored_receipt_invalid',
      },
    });
    const logged = b.logs.slice(logsBefore).join('\n');
    expect(logged).toContain('a receipt read from Redis failed its check');
    expect(logged).not.toContain(receiptId);
  }

  it("a receipt sealed under the owner's key but signed by a key the fleet never admitted is refused, not served", async () => {
    const { claims } = await sealedChat(a, false);
    const receiptId = randomUUID();
    const forged = createJwsSigner(await loadSigningKey(), 'JWT')({ ...claims, receipt_id: receiptId });
    await plant(receiptId, forged);
    await refusedFromRedis(receiptId);
  });

  it('a genuine receipt sealed where another receipt id rests (swapped) is refused, not served', async () => {
    const { jws } = await sealedChat(a, false);
    const otherId = randomUUID();
    await plant(otherId, jws);
    await refusedFromRedis(otherId);
  });
});
