import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { TiledTree } from '../../src/tlog/tiled-tree.ts';
import { tilesOfTree } from '../../src/protocol/tlog/tile-path.ts';
import { rootHash } from '../../src/protocol/tlog/tree-hashes.ts';

// MTH written from RFC 9162 section 2.1.1 alone, with its own hashing: the reference the sequencer's shortcuts must meet.
const sha256 = (...parts: Uint8Array[]) => parts.reduce((h, p) => h.update(p), createHash('sha256')).digest();
function mth(leaves: readonly Buffer[], start: number, end: number): Buffer {
  if (end - start === 1) return sha256(Buffer.from([0]), leaves[start]!);
  let k = 1;
  while (k * 2 < end - start) k *= 2;
  return sha256(Buffer.from([1]), mth(leaves, start, start + k), mth(leaves, start + k, end));
}

describe("the sequencer's in-memory tree", () => {
  it('gives the same tiles for entries appended as bytes or as base64 (as workers send them), and the RFC 9162 root', () => {
    const size = 65_536 + 300; // a full level-1 tile, so the in-place reduction of full tiles runs at two levels
    const entries = Array.from({ length: size }, (_, i) => sha256(Buffer.from(`receipt-${i}`)));
    const fromBytes = new TiledTree();
    const fromBase64 = new TiledTree();
    for (const entry of entries) {
      fromBytes.append(entry);
      fromBase64.appendBase64(entry.toString('base64'));
    }
    for (const tile of tilesOfTree(size)) expect(fromBase64.read(tile)!.equals(fromBytes.read(tile)!)).toBe(true);
    const expected = mth(entries, 0, size).toString('hex');
    expect(rootHash(fromBytes.reader, size).toString('hex')).toBe(expected);
    expect(rootHash(fromBase64.reader, size).toString('hex')).toBe(expected);
    expect(rootHash(fromBytes.reader, 65_536).toString('hex')).toBe(mth(entries, 0, 65_536).toString('hex'));
  });

  it('refuses an entry that is not 32 bytes in canonical base64, and appends nothing', () => {
    const tree = new TiledTree();
    const entry = Buffer.alloc(32, 7).toString('base64');
    for (const bad of ['', entry.slice(1), entry + 'A', entry.slice(0, 42) + 'B=', '!' + entry.slice(1)])
      expect(() => tree.appendBase64(bad)).toThrow(RangeError);
    expect(tree.size).toBe(0);
  });
});
