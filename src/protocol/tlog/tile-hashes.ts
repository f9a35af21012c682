import { hash } from 'node:crypto';
import { HASH_BYTES } from './merkle.ts';
import { TILE_HEIGHT } from './tile-path.ts';
import type { HashReader } from './tree-hashes.ts';

/** 0x01 || left || right (RFC 9162 2.1.1), filled for each node hash of a run. */
const NODE_INPUT = Buffer.alloc(1 + 2 * HASH_BYTES, 0x01);
/** The run being reduced in place, a level at a time; grown to the longest run asked for (a tile: 8 KiB). */
let scratch = Buffer.alloc(0);

/**
 * MTH of `count` (a power of two) consecutive hashes of `hashes` from `first`: the levels inside a tile are
 * recomputed, never stored. Reduced in place, pairs to parents, with one-shot SHA-256 written straight into the
 * run as latin1 (no Buffer per node hash: the sequencer hashes a full tile every 256 entries, the verifiers
 * every tile they read).
 */
export function hashOfRun(hashes: Buffer, first: number, count: number): Buffer {
  if (count === 1) return hashes.subarray(first * HASH_BYTES, (first + 1) * HASH_BYTES);
  const bytes = count * HASH_BYTES;
  if (scratch.length < bytes) scratch = Buffer.alloc(bytes);
  hashes.copy(scratch, 0, first * HASH_BYTES, first * HASH_BYTES + bytes);
  for (let width = count; width > 1; width /= 2) {
    for (let j = 0; j < width / 2; j++) {
      scratch.copy(NODE_INPUT, 1, j * 2 * HASH_BYTES, (j + 1) * 2 * HASH_BYTES);
      scratch.write(hash('sha256', NODE_INPUT, 'binary'), j * HASH_BYTES, HASH_BYTES, 'binary');
    }
  }
  return Buffer.from(scratch.subarray(0, HASH_BYTES));
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
