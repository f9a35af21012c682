import { hash } from 'node:crypto';
import { HASH_BYTES } from '../verify/tlog/merkle.ts';
import { hashOfRun } from '../verify/tlog/tile-hashes.ts';
import { TILE_HEIGHT, TILE_WIDTH, type TileRef } from '../verify/tlog/tile-path.ts';
import type { HashReader } from '../verify/tlog/tree-hashes.ts';
import { ENTRY_BYTES } from '../verify/tlog/entry-bundle.ts';

const BUNDLED = 2 + ENTRY_BYTES;
const TILE_BYTES = TILE_WIDTH * HASH_BYTES;

// The sequencer hashes into these and carries each hash as a 32-character latin1 ('binary') string: a string costs the heap less
// than a Buffer's own memory, and the hashes land in the tiles with one copy.
/** 0x00 || entry: a leaf hash's input. */
const LEAF_INPUT = Buffer.alloc(1 + ENTRY_BYTES, 0x00);
/** 0x01 || left || right: a node hash's input. */
const NODE_INPUT = Buffer.alloc(1 + 2 * HASH_BYTES, 0x01);
/** A full tile's hashes, reduced in place to its root. */
const RUN = Buffer.alloc(TILE_BYTES);

/** MTH of a full tile's 256 hashes (what hashOfRun(tile, 0, 256) gives), as a latin1 ('binary') string. */
function fullTileHash(tile: Buffer): string {
  tile.copy(RUN);
  for (let width = TILE_WIDTH; width > 1; width /= 2) {
    for (let j = 0; j < width / 2; j++) {
      RUN.copy(NODE_INPUT, 1, j * 2 * HASH_BYTES, (j + 1) * 2 * HASH_BYTES);
      RUN.write(hash('sha256', NODE_INPUT, 'binary'), j * HASH_BYTES, HASH_BYTES, 'binary');
    }
  }
  return RUN.toString('binary', 0, HASH_BYTES);
}

/** Whether `entry` is an entry (32 bytes) in canonical base64. */
export const isBase64Entry = (entry: string): boolean => /^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/.test(entry);

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
    const { bundle, at } = this.slot();
    bundle.set(entry, at + 2);
    this.integrateSlot(bundle, at);
  }

  /** Appends one entry given in canonical base64 (isBase64Entry), as the log keeps pending entries. */
  appendBase64(entry: string): void {
    if (!isBase64Entry(entry)) throw new RangeError(`a log entry is ${ENTRY_BYTES} bytes`);
    const { bundle, at } = this.slot();
    bundle.write(entry, at + 2, ENTRY_BYTES, 'base64');
    this.integrateSlot(bundle, at);
  }

  /** Where the next entry goes in its bundle, its length prefix written. */
  private slot(): { bundle: Buffer; at: number } {
    const bundle = (this.bundles[Math.floor(this.size / TILE_WIDTH)] ??= Buffer.alloc(TILE_WIDTH * BUNDLED));
    const at = (this.size % TILE_WIDTH) * BUNDLED;
    bundle.writeUInt16BE(ENTRY_BYTES, at);
    return { bundle, at };
  }

  /** Hashes the entry just written at `at` as the next leaf. */
  private integrateSlot(bundle: Buffer, at: number): void {
    bundle.copy(LEAF_INPUT, 1, at + 2, at + 2 + ENTRY_BYTES);
    this.push(0, this.size, hash('sha256', LEAF_INPUT, 'binary'));
    this.size++;
  }

  /** Stores `hashed` (latin1) at `index` of tile level `level`; a tile it fills has its hash pushed to the level above. */
  private push(level: number, index: number, hashed: string): void {
    const tiles = (this.levels[level] ??= []);
    const tile = (tiles[Math.floor(index / TILE_WIDTH)] ??= Buffer.alloc(TILE_BYTES));
    tile.write(hashed, (index % TILE_WIDTH) * HASH_BYTES, HASH_BYTES, 'binary');
    if (index % TILE_WIDTH === TILE_WIDTH - 1) this.push(level + 1, Math.floor(index / TILE_WIDTH), fullTileHash(tile));
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
