import { HASH_BYTES, leafHash } from '../verify/tlog/merkle.ts';
import { hashOfRun } from '../verify/tlog/tile-hashes.ts';
import { TILE_HEIGHT, TILE_WIDTH, type TileRef } from '../verify/tlog/tile-path.ts';
import type { HashReader } from '../verify/tlog/tree-hashes.ts';

import { ENTRY_BYTES } from '../verify/tlog/entry-bundle.ts';

const BUNDLED = 2 + ENTRY_BYTES;
const TILE_BYTES = TILE_WIDTH * HASH_BYTES;

/**
 * The log's Merkle tree as C2SP tiles in memory: per tile level, 8 KiB buffers of 256 hashes (the rightmost one
 * filling up), and the entry bundles. A full tile's hash is pushed to the level above as it fills, so appending
 * costs one leaf hash and, every 256 entries, 255 node hashes per level.
 */
export class TiledTree {
  size = 0;
  private readonly levels: Buffer[][] = [];
  private readonly bundles: Buffer[] = [];

  /** Appends one entry (32 bytes). */
  append(entry: Uint8Array): void {
    if (entry.length !== ENTRY_BYTES) throw new RangeError(`a log entry is ${ENTRY_BYTES} bytes`);
    const i = this.size;
    const bundle = (this.bundles[Math.floor(i / TILE_WIDTH)] ??= Buffer.alloc(TILE_WIDTH * BUNDLED));
    const at = (i % TILE_WIDTH) * BUNDLED;
    bundle.writeUInt16BE(ENTRY_BYTES, at);
    bundle.set(entry, at + 2);
    this.push(0, i, leafHash(entry));
    this.size = i + 1;
  }

  private push(level: number, index: number, hash: Uint8Array): void {
    const tiles = (this.levels[level] ??= []);
    const tile = (tiles[Math.floor(index / TILE_WIDTH)] ??= Buffer.alloc(TILE_BYTES));
    tile.set(hash, (index % TILE_WIDTH) * HASH_BYTES);
    if (index % TILE_WIDTH === TILE_WIDTH - 1) this.push(level + 1, Math.floor(index / TILE_WIDTH), hashOfRun(tile, 0, TILE_WIDTH));
  }

  /** How many hashes tile level `level` holds for a tree of `size`. */
  static countAt(level: number | 'entries', size: number): number {
    return level === 'entries' ? size : Math.floor(size / TILE_WIDTH ** level);
  }

  /** The bytes of a tile or entry bundle of the tree at `size` (default: its current size), or undefined when the tree had not that many hashes there. */
  read(tile: TileRef, size = this.size): Buffer | undefined {
    const available = TiledTree.countAt(tile.level, Math.min(size, this.size)) - tile.index * TILE_WIDTH;
    if (available < tile.width) return undefined;
    if (tile.level === 'entries') return this.bundles[tile.index]!.subarray(0, tile.width * BUNDLED);
    return this.levels[tile.level]![tile.index]!.subarray(0, tile.width * HASH_BYTES);
  }

  /** The leaf data (entry) at `index`. */
  entry(index: number): Buffer {
    const at = (index % TILE_WIDTH) * BUNDLED + 2;
    return this.bundles[Math.floor(index / TILE_WIDTH)]!.subarray(at, at + ENTRY_BYTES);
  }

  /** Complete-subtree hashes below the current size, for roots and proofs (src/verify/tlog/tree-hashes.ts). */
  readonly reader: HashReader = (level, index) => {
    const tileLevel = Math.floor(level / TILE_HEIGHT);
    const count = 2 ** (level % TILE_HEIGHT);
    const first = index * count;
    const tile = this.levels[tileLevel]?.[Math.floor(first / TILE_WIDTH)];
    if (tile === undefined || (index + 1) * count > TiledTree.countAt(tileLevel, this.size)) throw new RangeError(`no hash at level ${level} index ${index}`);
    return hashOfRun(tile, first % TILE_WIDTH, count);
  };
}
