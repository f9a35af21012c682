import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger/logger.ts';
import { TransparencyLog } from '../../src/tlog/transparency-log.ts';
import { openCheckpoint } from '../../src/protocol/tlog/checkpoint.ts';
import { leafHash, verifyConsistency, verifyInclusion } from '../../src/protocol/tlog/merkle.ts';
import { parseVerifierKey } from '../../src/protocol/tlog/note.ts';
import { receiptEntry, verifyReceiptInLog, verifyWholeLog } from '../../src/verify/tlog/log-client.ts';
import { tilesOfTree } from '../../src/protocol/tlog/tile-path.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { attestedLog } from '../support/transparency-log.ts';

/** docs/log.md#memory: the right edge (the partial bundle, one partial tile at each of levels 0, 1 and 2 here) and 64 tiles read back. */
const RIGHT_EDGE = 4;
const READ_BACK = 64;
const ENTRIES = 150_000;

const logger = createLogger('silent');
const open = (dir: string) => TransparencyLog.open({ dir, originPrefix: 'test.example', batchMs: 1000, idsKept: 10, logger });
const receipt = (i: number) => `receipt-${i}`;

let engine: TestEngine;
let sigil: TestSigil | undefined;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m1'] });
});

afterAll(async () => {
  await sigil?.close();
  await engine.close();
});

/** A Sigil serving the log in `dir` (it checks the stored log on start, as after a restart). */
function serve(dir: string): Promise<TestSigil> {
  return startTestSigil({
    upstreams: { main: { url: engine.baseUrl } },
    models: [{ id: 'm1' }],
    config: { brand: 'Acme', transparency_log: { dir, batch_ms: 50 } },
  });
}

describe('the log in memory: its right edge and a few tiles read back', () => {
  it(`holds at most ${RIGHT_EDGE + READ_BACK} tiles for ${ENTRIES.toLocaleString('en')} entries while every tile is served and proofs verify, across restarts`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-tlog-memory-'));
    const log = await open(dir);
    const most: number[] = [];
    let early = '';
    for (let i = 0; i < ENTRIES; i++) {
      log.append(receipt(i));
      if (i + 1 === 1_000) {
        await log.integrate();
        early = log.checkpoint.note;
      }
      if ((i + 1) % 5_000 === 0) {
        await log.integrate();
        most.push(log.tilesInMemory);
      }
    }
    expect(Math.max(...most)).toBeLessThanOrEqual(RIGHT_EDGE);
    const key = parseVerifierKey(log.key.vkey);
    const checkpoint = openCheckpoint(log.checkpoint.note, key, log.origin);
    expect(checkpoint.size).toBe(ENTRIES);

    // Proofs and tiles of the whole tree, read back from the folder: still bounded, every proof checked by the RFC's verifier.
    const sampled = [0, 255, 256, 65_535, 65_536, 131_071, 131_072, ENTRIES - 1];
    for (let index = 1; index < ENTRIES; index += 1_009) sampled.push(index);
    for (const index of sampled) {
      const { entry, proof } = log.inclusion(index)!;
      expect(entry.equals(receiptEntry(receipt(index)))).toBe(true);
      verifyInclusion(index, ENTRIES, leafHash(entry), proof, checkpoint.root);
    }
    for (const tile of tilesOfTree(ENTRIES)) {
      expect(log.tile(tile)!.length).toBe(tile.width * 32);
      if (tile.level === 0) expect(log.tile({ ...tile, level: 'entries' })!.length).toBe(tile.width * 34);
    }
    expect(log.tilesInMemory).toBeLessThanOrEqual(RIGHT_EDGE + READ_BACK);
    await log.close();

    // A restart, serving: every tile and bundle served hashes to the checkpoint (the spec's verifier, over HTTP).
    sigil = await serve(dir);
    const { log: trusted } = await attestedLog(sigil.url);
    expect((await verifyWholeLog(trusted)).entries).toBe(ENTRIES);
    for (const index of [0, 70_000, ENTRIES - 1]) expect((await verifyReceiptInLog(trusted, receipt(index), { index })).index).toBe(index);
    await sigil.close();
    sigil = undefined;

    // And in process again, with two full tiles deleted (as by a crash between writes): the start writes them again
    // from the entries, and leaves only the right edge in memory; proofs still verify.
    const deleted = ['tile/0/100', 'tile/1/001'].map((path) => ({ path, bytes: readFileSync(join(dir, path)) }));
    for (const { path } of deleted) rmSync(join(dir, path));
    const again = await open(dir);
    expect(again.tilesInMemory).toBeLessThanOrEqual(RIGHT_EDGE);
    for (const { path, bytes } of deleted) expect(readFileSync(join(dir, path)).equals(bytes)).toBe(true);
    const reopened = openCheckpoint(again.checkpoint.note, parseVerifierKey(again.key.vkey), again.origin);
    expect(reopened.root.equals(checkpoint.root)).toBe(true);
    for (const index of [3, 99_999, ENTRIES - 1])
      verifyInclusion(index, ENTRIES, leafHash(receiptEntry(receipt(index))), again.inclusion(index)!.proof, reopened.root);
    again.append('one more');
    await again.integrate();
    const grown = openCheckpoint(again.checkpoint.note, parseVerifierKey(again.key.vkey), again.origin);
    verifyConsistency(1_000, ENTRIES + 1, again.consistency(1_000)!, openCheckpoint(early, key, log.origin).root, grown.root);
    expect(again.tilesInMemory).toBeLessThanOrEqual(RIGHT_EDGE + READ_BACK);
    await again.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses a tile altered or deleted on disk after it left memory, and serves it again once restored', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-tlog-tamper-'));
    const log = await open(dir);
    for (let i = 0; i < 1_000; i++) log.append(receipt(i));
    await log.close();
    sigil = await serve(dir);
    const { log: trusted } = await attestedLog(sigil.url);
    const get = async (path: string) => {
      const res = await fetch(`${sigil!.url}/v1/log/${path}`);
      return { status: res.status, body: Buffer.from(await res.arrayBuffer()) };
    };
    const refused = async (path: string, message: RegExp) => {
      const res = await get(path);
      expect(res.status).toBe(500);
      const { error } = JSON.parse(res.body.toString()) as { error: { code: string; type: string; message: string } };
      expect(error).toMatchObject({ code: 'log_tile_invalid', type: 'server_error' });
      expect(error.message).toMatch(message);
    };
    const original = (path: string) => readFileSync(join(dir, path));
    const kept = { leaves: original('tile/0/001'), bundle: original('tile/entries/000'), gone: original('tile/0/002') };

    // A hash in a level-0 tile flipped: the tile, a proof through it and its entry bundle are refused.
    const altered = Buffer.from(kept.leaves);
    altered[40]! ^= 1;
    writeFileSync(join(dir, 'tile/0/001'), altered);
    await refused('tile/0/001', /tile\/0\/001 in the log folder does not hash to its hash in tile level 1: it was altered after it was written/);
    await refused('proof?index=300', /tile\/0\/001 .*altered/);
    await refused('tile/entries/001', /tile\/0\/001 .*altered/);
    expect(sigil.logs.join('\n')).toMatch(/a stored tile was refused on reading it back/);

    // An entry changed in a bundle, and a tile deleted.
    const bundle = Buffer.from(kept.bundle);
    bundle[2 + 34 * 7]! ^= 1;
    writeFileSync(join(dir, 'tile/entries/000'), bundle);
    await refused('tile/entries/000', /tile\/entries\/000 in the log folder holds entries the level-0 tile does not hash/);
    await refused('proof?index=7', /tile\/entries\/000/);
    rmSync(join(dir, 'tile/0/002'));
    await refused('tile/0/002', /tile\/0\/002 is missing from the log folder/);
    expect((await get('tile/0/000')).status).toBe(200);

    // Restored: served as written, and proofs verify (nothing refused was kept).
    writeFileSync(join(dir, 'tile/0/001'), kept.leaves);
    writeFileSync(join(dir, 'tile/entries/000'), kept.bundle);
    writeFileSync(join(dir, 'tile/0/002'), kept.gone);
    expect((await get('tile/0/001')).body.equals(kept.leaves)).toBe(true);
    expect((await get('tile/entries/000')).body.equals(kept.bundle)).toBe(true);
    for (const index of [7, 300, 600]) expect((await verifyReceiptInLog(trusted, receipt(index), { index })).index).toBe(index);
    await sigil.close();
    sigil = undefined;
    rmSync(dir, { recursive: true, force: true });
  });
});
