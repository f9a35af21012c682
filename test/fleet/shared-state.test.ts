import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeAttestationDocument, NO_GPUS } from '../../src/attestation/document.ts';
import { START_NONCE, type KeyOrigins } from '../../src/protocol/attestation.ts';
import { createNoneProvider } from '../../src/attestation/none.ts';
import { parseConfig } from '../../src/config/load.ts';
import { FleetConnection } from '../../src/fleet/connection.ts';
import { joinFleet } from '../../src/fleet/join.ts';
import { KeyRegistry } from '../../src/fleet/key-registry.ts';
import { RedisLimitCounters } from '../../src/fleet/limit-counters.ts';
import { RedisReceiptStore } from '../../src/fleet/receipt-store.ts';
import { fleetKeys } from '../../src/fleet/redis-keys.ts';
import { createLogger } from '../../src/logger/logger.ts';
import { loadSigningKey, type SigningKey } from '../../src/receipts/signing-key.ts';
import { createJwsSigner } from '../../src/receipts/signer.ts';
import { signHeartbeat } from '../../src/fleet/heartbeat.ts';
import { redisTestsSkipped, startTestRedis, type TestRedis } from './redis-server.ts';
import { waitFor } from '../support/wait-for.ts';

const installed = !redisTestsSkipped();
const logLines: string[] = [];
const logger = createLogger(
  'info',
  new Writable({
    write(chunk: Buffer, _enc, done) {
      logLines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  }),
);

let redis: TestRedis;
const connections: FleetConnection[] = [];

async function connect(url = redis.url): Promise<FleetConnection> {
  const connection = new FleetConnection({ url, commandTimeoutMs: 250, connectTimeoutMs: 1000, name: 'test', logger });
  connections.push(connection);
  expect(await connection.connect(2000)).toBe('up');
  return connection;
}

beforeAll(async () => {
  if (installed) redis = await startTestRedis();
});

afterAll(async () => {
  if (!installed) return;
  await Promise.all(connections.map((c) => c.close()));
  await redis.stop();
});

describe.skipIf(!installed)('RedisLimitCounters', () => {
  it('counts one window atomically across many replicas adding at once', async () => {
    const keys = fleetKeys(`t-${randomBytes(3).toString('hex')}`);
    const replicas = await Promise.all([1, 2, 3, 4, 5].map(async () => new RedisLimitCounters(await connect(), keys)));
    const totals = await Promise.all(replicas.flatMap((r) => Array.from({ length: 20 }, () => r.add('rpm:k', 1, 60_000))));
    expect(totals.map((t) => t.total).sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect((await replicas[0]!.peek('rpm:k', 60_000)).total).toBe(100);
    expect(totals[0]!.resetAt % 60_000).toBe(0);
  });

  it('shares concurrency slots, and frees a slot whose holder died once its TTL passes', async () => {
    const keys = fleetKeys(`t-${randomBytes(3).toString('hex')}`);
    const a = new RedisLimitCounters(await connect(), keys);
    const b = new RedisLimitCounters(await connect(), keys);
    expect(await a.acquire('conc:k', 2, 400)).toBe(true);
    expect(await b.acquire('conc:k', 2, 400)).toBe(true);
    expect(await b.acquire('conc:k', 2, 400)).toBe(false);
    await b.release('conc:k');
    expect(await a.acquire('conc:k', 2, 400)).toBe(true);
    expect(await b.acquire('conc:k', 2, 400)).toBe(false);
    // Replica a "dies" holding two slots: they expire on their own.
    // real clock: a slot expires by Redis's clock (400 ms TTL)
    await new Promise((r) => setTimeout(r, 450));
    expect(await b.acquire('conc:k', 2, 400)).toBe(true);
    expect(await b.acquire('conc:k', 2, 400)).toBe(true);
  });
});

describe.skipIf(!installed)('RedisReceiptStore', () => {
  it('gives a receipt to its owner on any replica, and forgets it after the retention', async () => {
    const keys = fleetKeys(`t-${randomBytes(3).toString('hex')}`);
    const signingKey = await loadSigningKey();
    const jwks = { keys: [signingKey.publicJwk] };
    const a = new RedisReceiptStore(await connect(), keys, { retentionS: 1, maxEntries: 10, jwks: () => jwks, logger });
    const b = new RedisReceiptStore(await connect(), keys, { retentionS: 1, maxEntries: 10, jwks: () => jwks, logger });
    const owner = { keyHash: 'aa'.repeat(32), secret: randomBytes(32) };
    const jws = createJwsSigner(signingKey, 'JWT')({ receipt_id: 'r1' });
    await a.put('r1', owner, jws);
    expect(await b.get('r1', owner)).toBe(jws);
    // Another key: same hash claimed, another secret (the hash alone opens nothing).
    expect(await b.get('r1', { keyHash: owner.keyHash, secret: randomBytes(32) })).toBeUndefined();
    // real clock: Redis expires the receipt by its own clock (PX, 1 s retention)
    await new Promise((r) => setTimeout(r, 1100));
    expect(await b.get('r1', owner)).toBeUndefined();
  });
});

describe.skipIf(!installed)('KeyRegistry', () => {
  const GENERATED: KeyOrigins = { receipt: { origin: 'generated' }, tls: null, hpke: { origin: 'generated' } };

  async function startDocument(signingKey: SigningKey, policyHash = 'sha256:' + '33'.repeat(32), keyOrigin = GENERATED) {
    const parts = { jwks: { keys: [signingKey.publicJwk] }, policyHash, tlsSpkiSha256: null, hpkeKeyConfig: null };
    return (await makeAttestationDocument({ provider: createNoneProvider(), collectGpuEvidence: NO_GPUS, eventLog: null, keyOrigin }, parts, START_NONCE))
      .document;
  }

  async function registry(namespace: string, retentionMs: number, admitUnattested = true, admitLoaded = false) {
    const signingKey = await loadSigningKey();
    const document = await startDocument(signingKey);
    const r = new KeyRegistry({
      connection: await connect(),
      keys: fleetKeys(namespace),
      replicaId: signingKey.kid.slice(0, 6),
      signingKey,
      attestation: document,
      ttlMs: 300,
      retentionMs,
      admission: {
        ours: () => ({ doc: document, manifest: null }),
        trusted: { measurements: new Set([document.measurement]), manifests: new Set<string>() },
        admitUnattested,
        admitLoaded,
      },
      logger,
    });
    await r.start();
    return { registry: r, kid: signingKey.kid };
  }

  it('serves a retired key for the retention window, then drops it', async () => {
    const ns = `t-${randomBytes(3).toString('hex')}`;
    const a = await registry(ns, 700);
    const b = await registry(ns, 700);
    await a.registry.refresh();
    expect(a.registry.jwks.keys.map((k) => k.kid).sort()).toEqual([a.kid, b.kid].sort());
    await b.registry.stop();
    const stoppedAt = Date.now();
    // Retired, still served; how long it stays is measured below, when it is dropped.
    await a.registry.refresh();
    expect(a.registry.jwks.keys.map((k) => k.kid).sort()).toEqual([a.kid, b.kid].sort());
    await waitFor('the retired key dropped', () => a.registry.jwks.keys.length === 1, { timeoutMs: 3000 });
    expect(a.registry.jwks.keys.map((k) => k.kid)).toEqual([a.kid]);
    expect(Date.now() - stoppedAt).toBeGreaterThanOrEqual(700);
    await a.registry.stop();
  });

  /** Writes a peer into Redis as a replica would, or as whoever runs Redis could: entry, listing score and heartbeat. */
  async function plant(namespace: string, key: SigningKey, options: { policyHash?: string; keyOrigin?: KeyOrigins; beatAt: number; score: number }) {
    const keys = fleetKeys(namespace);
    const attestation = await startDocument(key, options.policyHash, options.keyOrigin);
    const client = (await connect()).client;
    await client.set(
      keys.signingKeyPrefix + key.kid,
      JSON.stringify({ replica_id: 'planted', kid: key.kid, attestation, published_at: new Date().toISOString() }),
      'PX',
      60_000,
    );
    await client.set(keys.heartbeatPrefix + key.kid, signHeartbeat(key, 'planted', options.beatAt), 'PX', 60_000);
    await client.zadd(keys.signingKeys, options.score, key.kid);
  }

  const DAY = 24 * 3600 * 1000;

  it('without hardware, serves no peer key unless fleet.admit_unattested_peers: a copied entry with a new key and a heartbeat a day ahead is refused', async () => {
    const ns = `t-${randomBytes(3).toString('hex')}`;
    const a = await registry(ns, 700, false);
    const b = await registry(ns, 700, false);
    const intruder = await loadSigningKey();
    await plant(ns, intruder, { beatAt: Date.now(), score: Date.now() + DAY });
    await a.registry.refresh();
    await waitFor('the copied entry refused', () =>
      logLines.some((l) => l.includes(intruder.kid) && l.includes('set fleet.admit_unattested_peers to serve such keys')),
    );
    await a.registry.refresh();
    expect(a.registry.jwks.keys.map((k) => k.kid)).toEqual([a.kid]);
    expect(logLines.some((l) => l.includes(intruder.kid) && l.includes('set fleet.admit_unattested_peers to serve such keys'))).toBe(true);
    await Promise.all([a.registry.stop(), b.registry.stop()]);
  });

  it('decides liveness by the heartbeats a key signs, not by the score Redis holds: replayed old and future heartbeats are refused', async () => {
    const ns = `t-${randomBytes(3).toString('hex')}`;
    const a = await registry(ns, 700);
    const replayed = await loadSigningKey();
    const future = await loadSigningKey();
    const live = await loadSigningKey();
    // A replica long gone, its last heartbeat replayed under a score a day ahead.
    await plant(ns, replayed, { beatAt: Date.now() - 60_000, score: Date.now() + DAY });
    // A heartbeat dated a day ahead: it would keep a retired key forever.
    await plant(ns, future, { beatAt: Date.now() + DAY, score: Date.now() + DAY });
    await plant(ns, live, { beatAt: Date.now(), score: Date.now() });
    await a.registry.refresh();
    expect(a.registry.jwks.keys.map((k) => k.kid).sort()).toEqual([a.kid, live.kid].sort());
    expect(logLines.some((l) => l.includes(future.kid) && l.includes('ms in the future'))).toBe(true);
    // The live peer stops beating; Redis pushes its score a day ahead: it still retires after TTL + retention.
    await (await connect()).client.zadd(fleetKeys(ns).signingKeys, Date.now() + DAY, live.kid);
    await waitFor('the live peer retired', () => a.registry.jwks.keys.length === 1, { timeoutMs: 3000 });
    expect(a.registry.jwks.keys.map((k) => k.kid)).toEqual([a.kid]);
    await a.registry.stop();
  });

  it('refuses a peer that serves another catalogue (another policy hash)', async () => {
    const ns = `t-${randomBytes(3).toString('hex')}`;
    const a = await registry(ns, 700);
    const other = await loadSigningKey();
    await plant(ns, other, { policyHash: 'sha256:' + '44'.repeat(32), beatAt: Date.now(), score: Date.now() });
    await a.registry.refresh();
    expect(a.registry.jwks.keys.map((k) => k.kid)).toEqual([a.kid]);
    expect(logLines.some((l) => l.includes(other.kid) && l.includes('the peer serves another catalogue'))).toBe(true);
    await a.registry.stop();
  });

  describe('the origin of a peer key', () => {
    const LOADED: KeyOrigins = { receipt: { origin: 'loaded', file: '/etc/sigil/receipt-key.pem' }, tls: null, hpke: { origin: 'generated' } };
    const SEALED: KeyOrigins = { receipt: { origin: 'sealed', bound_to: 'sev-snp:vcek:measurement+policy' }, tls: null, hpke: null };

    it('refuses a peer whose binding declares its receipt key loaded from a file, and says how to accept it', async () => {
      const ns = `t-${randomBytes(3).toString('hex')}`;
      const a = await registry(ns, 700);
      const loaded = await loadSigningKey();
      await plant(ns, loaded, { keyOrigin: LOADED, beatAt: Date.now(), score: Date.now() });
      await a.registry.refresh();
      expect(a.registry.jwks.keys.map((k) => k.kid)).toEqual([a.kid]);
      expect(
        logLines.some(
          (l) =>
            l.includes(loaded.kid) &&
            l.includes(
              'the receipt signing key was loaded from /etc/sigil/receipt-key.pem: a file the operator controls, so the operator may hold the same key and sign or decrypt outside the enclave (set fleet.admit_loaded_keys to serve such keys)',
            ),
        ),
      ).toBe(true);
      await a.registry.stop();
    });

    it('serves it with fleet.admit_loaded_keys; a key declared sealed by SEV-SNP on a peer without that evidence is refused either way', async () => {
      const ns = `t-${randomBytes(3).toString('hex')}`;
      const accepting = await registry(ns, 700, true, true);
      const strict = await registry(ns, 700);
      const loaded = await loadSigningKey();
      const sealed = await loadSigningKey();
      await plant(ns, loaded, { keyOrigin: LOADED, beatAt: Date.now(), score: Date.now() });
      await plant(ns, sealed, { keyOrigin: SEALED, beatAt: Date.now(), score: Date.now() });
      await accepting.registry.refresh();
      await strict.registry.refresh();
      expect(accepting.registry.jwks.keys.map((k) => k.kid).sort()).toEqual([accepting.kid, strict.kid, loaded.kid].sort());
      expect(strict.registry.jwks.keys.map((k) => k.kid).sort()).toEqual([accepting.kid, strict.kid].sort());
      expect(
        logLines.some(
          (l) => l.includes(sealed.kid) && l.includes('the receipt signing key is declared sealed by the SEV-SNP firmware, but the evidence is none'),
        ),
      ).toBe(true);
      await Promise.all([accepting.registry.stop(), strict.registry.stop()]);
    });

    it('refuses a peer that declares no key origin at all', async () => {
      const ns = `t-${randomBytes(3).toString('hex')}`;
      const a = await registry(ns, 700);
      const silent = await loadSigningKey();
      const attestation = await startDocument(silent);
      delete (attestation.binding as Partial<typeof attestation.binding>).key_origin;
      const client = (await connect()).client;
      await client.set(
        fleetKeys(ns).signingKeyPrefix + silent.kid,
        JSON.stringify({ replica_id: 'old', kid: silent.kid, attestation, published_at: new Date().toISOString() }),
        'PX',
        60_000,
      );
      await client.set(fleetKeys(ns).heartbeatPrefix + silent.kid, signHeartbeat(silent, 'old', Date.now()), 'PX', 60_000);
      await client.zadd(fleetKeys(ns).signingKeys, Date.now(), silent.kid);
      await a.registry.refresh();
      expect(a.registry.jwks.keys.map((k) => k.kid)).toEqual([a.kid]);
      expect(logLines.some((l) => l.includes(silent.kid) && l.includes('the binding does not say where its keys came from'))).toBe(true);
      await a.registry.stop();
    });
  });
});

describe.skipIf(!installed)('joinFleet', () => {
  it('starts degraded when Redis is down, then joins on its own when Redis comes up', async () => {
    const down = await startTestRedis();
    await down.kill();
    const config = parseConfig(
      JSON.stringify({ auth: { keys_file: 'none' }, fleet: { redis_url: down.url, namespace: 'late', key_ttl_s: 1, connect_timeout_ms: 300 } }),
      '/tmp/sigil.yaml',
    );
    const signingKey = await loadSigningKey();
    const started = Date.now();
    const parts = { jwks: { keys: [signingKey.publicJwk] }, policyHash: 'sha256:' + '33'.repeat(32), tlsSpkiSha256: null, hpkeKeyConfig: null };
    const { document: startDocument } = await makeAttestationDocument(
      { provider: createNoneProvider(), collectGpuEvidence: NO_GPUS, eventLog: null },
      parts,
      START_NONCE,
    );
    const fleet = await joinFleet(config.fleet!, config, { logger, signingKey, startDocument });
    try {
      expect(Date.now() - started).toBeLessThan(1000);
      expect(fleet.status.health()).toBe('degraded');
      expect(fleet.jwks.keys.map((k) => k.kid)).toEqual([signingKey.kid]);
      expect((await fleet.counters.add('rpm:x', 1, 60_000)).total).toBe(1);
      await down.start();
      await waitFor('the fleet up', () => fleet.status.health() === 'up', { timeoutMs: 5000 });
      expect(fleet.status.health()).toBe('up');
      const inspector = await connect(down.url);
      await waitFor('the key published', async () => (await inspector.client.zrange('late:signing-keys', 0, -1)).length > 0, { timeoutMs: 5000 });
      expect(await inspector.client.zrange('late:signing-keys', 0, -1)).toEqual([signingKey.kid]);
    } finally {
      await fleet.close();
      await down.stop();
    }
  });
});
