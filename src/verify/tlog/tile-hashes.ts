import { HASH_BYTES, nodeHash } from './merkle.ts';
import { TILE_HEIGHT } from './tile-path.ts';
import type { HashReader } from './tree-hashes.ts';

/** MTH of `count` (a power of two) consecutive hashes of `hashes` from `first`: the levels inside a tile are recomputed, never stored. */
export function hashOfRun(hashes: Buffer, first: number, count: number): Buffer {
  if (count === 1) return hashes.subarray(first * HASH_BYTES, (first + 1) * HASH_BYTES);
  const half = count / 2;
  return nodeHash(hashOfRun(hashes, first, half), hashOfRun(hashes, first + half, half));
}

/**
 * A HashReader over the hashes of each tile level, concatenated (`levels[L]` holds the hashes at Merkle level 8L):
 * the hash of Merkle level 8L + r is recomputed from 2^r hashes of tile level L.
 */
export function tileLevelsReader(levels: readonly Buffer[]): HashReader {
  return (level, index) => {
    const tileLevel = Math.floor(level / TILE_HEIGHT);
    const count = 2 ** (level % TILE_HEIGHT);
    const hashes = levels[tileLevel];
    if (hashes === undefined || (index + 1) * count * HASH_BYTES > hashes.length) throw new RangeError(`no hash at level ${level} index ${index}`);
    return hashOfRun(hashes, index * count, count);
  };
}
