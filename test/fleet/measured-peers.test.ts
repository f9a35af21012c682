/**
 * Peer admission on (fake) hardware: replicas on a configfs-tsm SEV-SNP guest whose reports a test AMD chain signs,
 * sharing a real Redis that the test writes to directly, as whoever runs Redis could.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addKey } from '../../src/auth/keys-file.ts';
import { createConfigfsTsmProvider } from '../../src/attestation/configfs-tsm.ts';
import { signHeartbeat } from '../../src/fleet/heartbeat.ts';
import type { AttestationDocumentV2 } from '../../src/protocol/attestation.ts';
import { loadSigningKey } from '../../src/receipts/signing-key.ts';
import { FakeConfigfs } from '../attestation/fake-configfs.ts';
import { amdCertTable, buildSnpReport, createAmdTestChain, type AmdTestChain } from '../support/evidence-fixtures.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { redisTestsSkipped, startTestRedis, type TestRedis } from './redis-server.ts';
import { waitFor } from '../support/wait-for.ts';

const installed = !redisTestsSkipped();
const KEY_TTL_S = 2;
const MEASUREMENT = Buffer.alloc(48, 0x5a);

let redis: TestRedis;
let engine: TestEngine;
let amd: AmdTestChain;
let inspector: Redis;
let dir: string;
let keysFile: string;
const namespace = `measured-${randomBytes(4).toString('hex')}`;
const ns = (key: string) => `${namespace}:${key}`;
const started: TestSigil[] = [];
const machines: FakeConfigfs[] = [];

/** A replica on its own fake SEV-SNP guest; `config` adds to the one configuration every replica shares byte for byte. */
async function replica(config: Record<string, unknown> = {}): Promise<TestSigil> {
  const machine = await FakeConfigfs.create({
    provider: 'sev_guest',
    makeEvidence: (inblob) => ({ outblob: buildSnpReport({ reportData: inblob, measurement: MEASUREMENT }, amd.vcekKey), auxblob: amdCertTable(amd) }),
  });
  machines.push(machine);
  const sigil = await startTestSigil({
    upstreams: { main: { url: engine.baseUrl } },
    models: [{ id: 'm1' }],
    config: {
      tls: { mode: 'off', allow_plaintext: true },
      auth: { keys_file: keysFile },
      trust_page: { dir: join(dir, 'no-trust-page') },
      fleet: { redis_url: redis.url, namespace, key_ttl_s: KEY_TTL_S },
      ...config,
    },
    start: { attestationProvider: await createConfigfsTsmProvider({ tsmPath: machine.reportDir, fs: machine }), trustRoots: amd.roots },
  });
  started.push(sigil);
  return sigil;
}

const kidOf = (s: TestSigil) => s.state.ctx.signingKey.kid;
const jwksKids = async (s: TestSigil) =>
  ((await (await fetch(`${s.url}/v1/verify/jwks.json`)).json()) as { keys: Array<{ kid: string }> }).keys.map((k) => k.kid);
const startDocument = async (s: TestSigil) => (await (await fetch(`${s.url}/v1/verify/attestation`)).json()) as AttestationDocumentV2;

const eventually = (probe: () => Promise<boolean>, timeoutMs: number) => waitFor('the peers to agree', probe, { timeoutMs });

let a: TestSigil;
let b: TestSigil;

beforeAll(async () => {
  if (!installed) return;
  redis = await startTestRedis();
  engine = await startTestEngine({ modelNames: ['m1'] });
  amd = await createAmdTestChain();
  dir = mkdtempSync(join(tmpdir(), 'sigil-measured-peers-'));
  keysFile = join(dir, 'api-keys');
  addKey(keysFile, 'fleet');
  inspector = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  a = await replica();
  b = await replica();
  // Hashing the code and node_modules listings for the first manifest takes seconds on a loaded machine.
}, 180_000);

afterAll(async () => {
  if (!installed) return;
  await Promise.all(started.map((s) => s.close(0)));
  await Promise.all(machines.map((m) => m.dispose()));
  inspector.disconnect();
  await engine.close();
  await redis.stop();
  await rm(dir, { recursive: true, force: true });
});

describe.skipIf(!installed)('a fleet on hardware admits a peer key only on fresh evidence of the same measured state', () => {
  it("two replicas of one deployment (one config, their own ports and names) name the same manifest and serve each other's keys, each on evidence made for its own nonce", async () => {
    const [docA, docB] = await Promise.all([startDocument(a), startDocument(b)]);
    expect(docA.tee).toBe('sev-snp');
    expect(docA.binding.manifest_sha384).toMatch(/^[0-9a-f]{96}$/);
    expect(docB.binding.manifest_sha384).toBe(docA.binding.manifest_sha384);
    const both = [kidOf(a), kidOf(b)].sort();
    await eventually(async () => (await jwksKids(a)).length === 2 && (await jwksKids(b)).length === 2, 5000);
    expect(await jwksKids(a)).toEqual(both);
    expect(await jwksKids(b)).toEqual(both);
    // B chose the nonce under A's key; A answered it with a report whose binding names only A's key.
    const nonce = await inspector.hget(ns(`challenge:${kidOf(a)}`), kidOf(b));
    expect(nonce).toMatch(/^[0-9a-f]{64}$/);
    const answer = JSON.parse((await inspector.hget(ns(`answer:${kidOf(a)}`), kidOf(b)))!) as { nonce: string; attestation: AttestationDocumentV2 };
    expect(answer.nonce).toBe(nonce);
    expect(answer.attestation.nonce).toBe(nonce);
    expect(answer.attestation.binding.jwks.keys.map((k) => k.kid)).toEqual([kidOf(a)]);
  });

  it('refuses a replica of the same image and catalogue with another configuration file, naming what differs', async () => {
    const other = await replica({ limits: { requests_per_minute: 999 } });
    const docOther = await startDocument(other);
    expect(docOther.measurement).toBe((await startDocument(a)).measurement);
    expect(docOther.binding.policy_hash).toBe((await startDocument(a)).binding.policy_hash);
    expect(docOther.binding.manifest_sha384).not.toBe((await startDocument(a)).binding.manifest_sha384);
    await eventually(async () => a.logs.some((l) => l.includes(kidOf(other)) && l.includes('a peer signing key is not served')), 5000);
    const line = a.logs.find((l) => l.includes(kidOf(other)) && l.includes('a peer signing key is not served'))!;
    expect(JSON.parse(line).reason).toBe(
      `the peer's manifest ${docOther.binding.manifest_sha384} is not this replica's ${(await startDocument(a)).binding.manifest_sha384} nor one of fleet.trusted_manifests: the configuration file differs`,
    );
    await eventually(async () => other.logs.some((l) => l.includes(kidOf(a)) && l.includes('the configuration file differs')), 5000);
    expect(await jwksKids(a)).toEqual([kidOf(a), kidOf(b)].sort());
    expect(await jwksKids(other)).toEqual([kidOf(other)]);
    await other.close(0);
  });

  it("refuses a key written into Redis: a copied replica entry with a new key, heartbeats that key signs, a score a day ahead, and A's evidence re-bound to it as the answer", async () => {
    const intruder = await loadSigningKey();
    const entry = JSON.parse((await inspector.get(ns(`signing-key:${kidOf(a)}`)))!) as Record<string, unknown>;
    const stolen = JSON.parse((await inspector.hget(ns(`answer:${kidOf(a)}`), kidOf(b)))!) as { attestation: AttestationDocumentV2; manifest: string };
    await inspector.set(ns(`signing-key:${intruder.kid}`), JSON.stringify({ ...entry, kid: intruder.kid, replica_id: 'intruder' }), 'PX', 60_000);
    await inspector.set(ns(`heartbeat:${intruder.kid}`), signHeartbeat(intruder, 'intruder', Date.now()), 'PX', 60_000);
    await inspector.zadd(ns('signing-keys'), Date.now() + 24 * 3600_000, intruder.kid);
    await inspector.publish(ns('members'), intruder.kid);
    // B challenges the new key; nothing can answer it but an enclave holding that key. Redis answers with A's evidence, re-bound.
    await eventually(async () => (await inspector.hget(ns(`challenge:${intruder.kid}`), kidOf(b))) !== null, 5000);
    const nonce = (await inspector.hget(ns(`challenge:${intruder.kid}`), kidOf(b)))!;
    const forged = { ...stolen.attestation, nonce, binding: { ...stolen.attestation.binding, jwks: { keys: [intruder.publicJwk] } } };
    await inspector.hset(ns(`answer:${intruder.kid}`), kidOf(b), JSON.stringify({ nonce, attestation: forged, manifest: stolen.manifest }));
    await inspector.publish(ns('members'), intruder.kid);
    await eventually(async () => b.logs.some((l) => l.includes(intruder.kid) && l.includes('a peer signing key is not served')), 5000);
    const reason = JSON.parse(b.logs.find((l) => l.includes(intruder.kid) && l.includes('a peer signing key is not served'))!).reason as string;
    expect(reason).toContain('attestation.report_data');
    // real clock: the refused key must stay out across a key TTL of refreshes
    await new Promise((r) => setTimeout(r, KEY_TTL_S * 1000));
    expect(await jwksKids(a)).toEqual([kidOf(a), kidOf(b)].sort());
    expect(await jwksKids(b)).toEqual([kidOf(a), kidOf(b)].sort());
  });

  it("refuses a replayed answer: once A has left, a replica that joins later gets A's old answer under its own challenge, and does not serve A's key", async () => {
    const old = JSON.parse((await inspector.hget(ns(`answer:${kidOf(a)}`), kidOf(b)))!) as {
      nonce: string;
      attestation: AttestationDocumentV2;
      manifest: string;
    };
    await a.close(0);
    const late = await replica();
    await eventually(async () => (await inspector.hget(ns(`challenge:${kidOf(a)}`), kidOf(late))) !== null, 5000);
    const nonce = (await inspector.hget(ns(`challenge:${kidOf(a)}`), kidOf(late)))!;
    await inspector.hset(ns(`answer:${kidOf(a)}`), kidOf(late), JSON.stringify({ ...old, nonce }));
    await inspector.publish(ns('members'), kidOf(a));
    await eventually(async () => late.logs.some((l) => l.includes(kidOf(a)) && l.includes('a peer signing key is not served')), 5000);
    const reason = JSON.parse(late.logs.find((l) => l.includes(kidOf(a)) && l.includes('a peer signing key is not served'))!).reason as string;
    expect(reason).toContain('attestation.report_data');
    await eventually(async () => (await jwksKids(late)).length === 2, 5000);
    expect(await jwksKids(late)).toEqual([kidOf(b), kidOf(late)].sort());
  });
});
