import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger/logger.ts';
import { TransparencyLog } from '../../src/tlog/transparency-log.ts';
import { openCheckpoint } from '../../src/protocol/tlog/checkpoint.ts';
import { leafHash, verifyConsistency, verifyInclusion } from '../../src/protocol/tlog/merkle.ts';
import { parseVerifierKey } from '../../src/protocol/tlog/note.ts';
import { receiptEntry } from '../../src/verify/tlog/log-client.ts';

const logger = createLogger('silent');
const open = (dir: string) => TransparencyLog.open({ dir, originPrefix: 'test.example', batchMs: 1000, idsKept: 10, logger });

describe('the sequencer and its tiles across restarts, past full tiles', () => {
  it('keeps 70,000 entries across a restart (full and partial tiles at three levels): the same root, proofs by the verifier', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sigil-tlog-unit-'));
    const log = await open(dir);
    const receipts = Array.from({ length: 70_000 }, (_, i) => `receipt-${i}`);
    let early = '';
    for (const [i, r] of receipts.entries()) {
      expect(log.append(r, `id-${i}`)).toBe(i);
      if (i === 299 || i === 65_535) await log.integrate();
      if (i === 299) early = log.checkpoint.note;
    }
    await log.close();
    const before = log.checkpoint;
    const key = parseVerifierKey(log.key.vkey);
    const first = openCheckpoint(before.note, key, log.origin);
    expect(first.size).toBe(70_000);
    // On disk: full tiles, every entry bundle, and the partial Merkle tiles (level 1 of width 17, level 2 of width 1): a complete log to mirror.
    expect(readFileSync(join(dir, 'tile/1/000')).length).toBe(256 * 32);
    expect(readFileSync(join(dir, 'tile/entries/273.p/112')).length).toBe(112 * 34);
    expect(readFileSync(join(dir, 'tile/1/001.p/17')).equals(log.tile({ level: 1, index: 1, width: 17 })!)).toBe(true);
    expect(existsSync(join(dir, 'tile/2/000.p/1'))).toBe(true);
    expect(log.tile({ level: 1, index: 1, width: 17 })!.length).toBe(17 * 32);
    expect(log.tile({ level: 2, index: 0, width: 1 })!.length).toBe(32);

    const again = await open(dir);
    const reopened = openCheckpoint(again.checkpoint.note, parseVerifierKey(again.key.vkey), again.origin);
    expect({ origin: again.origin, size: reopened.size, root: reopened.root.toString('hex') }).toEqual({
      origin: log.origin,
      size: 70_000,
      root: first.root.toString('hex'),
    });
    for (const index of [0, 255, 256, 65_535, 65_536, 69_999]) {
      const { entry, proof } = again.inclusion(index)!;
      expect(entry.equals(receiptEntry(receipts[index]!))).toBe(true);
      verifyInclusion(index, 70_000, leafHash(entry), proof, reopened.root);
    }
    again.append('one more');
    await again.integrate();
    const grown = openCheckpoint(again.checkpoint.note, parseVerifierKey(again.key.vkey), again.origin);
    verifyConsistency(70_000, 70_001, again.consistency(70_000)!, first.root, grown.root);
    verifyConsistency(300, 70_001, again.consistency(300)!, openCheckpoint(early, key, log.origin).root, grown.root);
    // Receipt ids are remembered in memory only, the last `ids_kept`: the leaf index always works.
    expect(log.indexesOf('id-69999')).toEqual([69_999]);
    expect(log.indexesOf('id-0')).toBeUndefined();
    expect(again.indexesOf('id-69999')).toBeUndefined();
    await again.close();

    // A full tile altered on disk: the next start refuses the folder.
    const tile = readFileSync(join(dir, 'tile/0/100'));
    tile[0]! ^= 1;
    writeFileSync(join(dir, 'tile/0/100'), tile);
    await expect(open(dir)).rejects.toThrow(/tile\/0\/100 does not match the hashes of the stored entries: the log was altered/);
  });
});
