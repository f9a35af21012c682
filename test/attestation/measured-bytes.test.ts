import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, open, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manifestDigest, manifestOfConfig } from '../../src/attestation/manifest.ts';
import { parseConfig } from '../../src/config/load.ts';
import type { AttestationDocumentV2 } from '../../src/protocol/attestation.ts';
import { catalogueEntry, startTestSigil, type TestSigil } from '../support/sigil.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { waitFor } from '../support/wait-for.ts';

const WEIGHTS = Buffer.from('weights the engine loads later, in another process\n');
const MODEL_HASH = 'sha256:' + createHash('sha256').update(WEIGHTS).digest('hex');
const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

let engine: TestEngine;
let dir: string;
const running: TestSigil[] = [];

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['a', 'b', 'c', 'd'] });
  dir = await mkdtemp(join(tmpdir(), 'sigil-measured-bytes-'));
});

afterAll(async () => {
  for (const sigil of running) await sigil.close(0);
  await engine.close();
  await rm(dir, { recursive: true, force: true });
});

/** A catalogue of one model whose weights are `fifo`: hashing them waits until the test writes them. */
const catalogueOf = (id: string, fifo: string) => Buffer.from(stringify({ models: [catalogueEntry({ id, model_hash: MODEL_HASH, weights: fifo }, 0)] }));

/**
 * Waits until Sigil opens the weights to hash them (so it has parsed the catalogue), replaces the catalogue file with
 * `swapped`, then lets the hashing finish. Returns the bytes the file held when Sigil parsed it.
 */
async function swapWhileHashing(fifo: string, catalogue: string, swapped: Buffer): Promise<Buffer> {
  const writer = await open(fifo, 'w'); // returns once Sigil has opened the other end
  const parsed = await readFile(catalogue);
  await writeFile(catalogue, swapped);
  await writer.write(WEIGHTS);
  await writer.close();
  return parsed;
}

const modelIds = async (sigil: TestSigil) =>
  ((await (await fetch(`${sigil.url}/v1/models`, { headers: { authorization: `Bearer ${sigil.key}` } })).json()) as { data: Array<{ id: string }> }).data.map(
    (m) => m.id,
  );
const reportedManifest = async (sigil: TestSigil) =>
  ((await (await fetch(`${sigil.url}/v1/verify/attestation`)).json()) as AttestationDocumentV2).binding.manifest_sha384;

/** What `sigil measure self` computes for this config with the catalogue bytes given. */
async function measuredAs(sigil: TestSigil, catalogue: Buffer): Promise<string> {
  const path = join(sigil.dir, 'sigil.yaml');
  const config = parseConfig(await readFile(path, 'utf8'), path);
  const models = [{ id: (catalogue.toString('utf8').match(/id: (\w+)/) ?? [])[1]!, model_hash: MODEL_HASH, measured: true }];
  return manifestDigest(await manifestOfConfig(config, sha256(catalogue), { execArgv: [], env: {} }, models)).sha384;
}

describe('the bytes measured are the bytes used', () => {
  it('a catalogue swapped on disk while the weights are hashed is measured as the catalogue served, at start and on reload', async () => {
    const fifo = join(dir, 'weights.fifo');
    execFileSync('mkfifo', [fifo]);
    const catalogue = join(dir, 'models.yaml');
    await writeFile(catalogue, catalogueOf('a', fifo));
    const starting = startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [], config: { catalogue } });
    const [parsed, sigil] = await Promise.all([swapWhileHashing(fifo, catalogue, catalogueOf('b', fifo)), starting]);
    running.push(sigil);
    expect(await modelIds(sigil)).toEqual(['a']);
    expect(await reportedManifest(sigil)).toBe(await measuredAs(sigil, parsed));
    expect(await reportedManifest(sigil)).not.toBe(await measuredAs(sigil, catalogueOf('b', fifo)));

    // A reload (the watcher sees the file change): swapped while it hashes, then once more after it is served.
    await writeFile(catalogue, catalogueOf('c', fifo));
    const reparsed = await swapWhileHashing(fifo, catalogue, catalogueOf('d', fifo));
    await waitFor('the catalogue c served', async () => (await modelIds(sigil)).join() === 'c');
    expect(await reportedManifest(sigil)).toBe(await measuredAs(sigil, reparsed));
    const writer = await open(fifo, 'w'); // the watcher's reload of d hashes the weights again
    await writer.write(WEIGHTS);
    await writer.close();
    await waitFor('the catalogue d served', async () => (await modelIds(sigil)).join() === 'd');
    expect(await reportedManifest(sigil)).toBe(await measuredAs(sigil, catalogueOf('d', fifo)));
  });

  it('a config changed on disk after start is not measured at a reload: the config in use is', async () => {
    const catalogue = join(dir, 'plain.yaml');
    await writeFile(catalogue, stringify({ models: [catalogueEntry({ id: 'a' }, 0)] }));
    const sigil = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [], config: { catalogue } });
    running.push(sigil);
    const before = await reportedManifest(sigil);
    const path = join(sigil.dir, 'sigil.yaml');
    await writeFile(path, (await readFile(path, 'utf8')) + 'brand: Changed\n');
    expect((await sigil.reload()).catalogue).toBe(true);
    expect(await reportedManifest(sigil)).toBe(before);
  });
});
