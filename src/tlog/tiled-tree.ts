import { hash } from 'node:crypto';
import { HASH_BYTES, leafHash } from '../protocol/tlog/merkle.ts';
import { hashOfRun } from '../protocol/tlog/tile-hashes.ts';
import { TILE_HEIGHT, TILE_WIDTH, type TileRef } from '../protocol/tlog/tile-path.ts';
import type { HashReader } from '../protocol/tlog/tree-hashes.ts';
import { ENTRY_BYTES, parseEntryBundle } from '../protocol/tlog/entry-bundle.ts';
import { StoredTiles } from './stored-tiles.ts';
import { InvariantError } from '../protocol/invariant-error.ts';

const BUNDLED = 2 + ENTRY_BYTES;
const TILE_BYTES = TILE_WIDTH * HASH_BYTES;

// The sequencer hashes leaves into this and carries each hash as a 32-character latin1 ('binary') string: a string costs
// the heap less than a Buffer's own memory, and the hashes land in the tiles with one copy.
/** 0x00 || entry: a leaf hash's input. */
const LEAF_INPUT = Buffer.alloc(1 + ENTRY_BYTES, 0x00);

/** Whether `entry` is an entry (32 bytes) in canonical base64. */
export const isBase64Entry = (entry: string): boolean => /^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/.test(entry);

/**
 * The log's Merkle tree as C2SP tiles: per tile level, 8 KiB buffers of 256 hashes (the rightmost one filling up),
 * and the entry bundles. A full tile's hash is pushed to the level above as it fills, so appending costs one leaf
 * hash and, every 256 entries, 255 node hashes per level.
 *
 * Memory (docs/log.md#memory): the tree holds the tiles being filled (the right edge: one per level and the
 * partial bundle) and the full ones not yet written. Once written to the log folder, full tiles are dropped
 * (`dropWritten`) and read back from it when needed, each checked against the hash the level above holds (a
 * bundle against the level-0 tile), the last 64 kept (StoredTiles). A tree without a folder keeps every tile.
 */
export class TiledTree {
  size = 0;
  private readonly levels: Array<Map<number, Buffer>> = [];
  private readonly bundles = new Map<number, Buffer>();
  private readonly stored: StoredTiles | undefined;

  /** `dir`: the log folder full tiles are read back from once dropped. */
  constructor(dir?: string) {
    this.stored = dir === undefined ? undefined : new StoredTiles(dir);
  }

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
    const bundle = this.filling('entries', Math.floor(this.size / TILE_WIDTH));
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
    const tile = this.filling(level, Math.floor(index / TILE_WIDTH));
    tile.write(hashed, (index % TILE_WIDTH) * HASH_BYTES, HASH_BYTES, 'binary');
    if (index % TILE_WIDTH === TILE_WIDTH - 1) this.push(level + 1, Math.floor(index / TILE_WIDTH), hashOfRun(tile, 0, TILE_WIDTH).toString('binary'));
  }

  /** The tile (or bundle) at `level` and `index` that appends fill, made when its first hash arrives. */
  private filling(level: number | 'entries', index: number): Buffer {
    const tiles = level === 'entries' ? this.bundles : (this.levels[level] ??= new Map());
    let tile = tiles.get(index);
    if (tile === undefined) tiles.set(index, (tile = Buffer.alloc(level === 'entries' ? TILE_WIDTH * BUNDLED : TILE_BYTES)));
    return tile;
  }

  /** How many hashes tile level `level` holds for a tree of `size`. */
  static countAt(level: number | 'entries', size: number): number {
    return level === 'entries' ? size : Math.floor(size / TILE_WIDTH ** level);
  }

  /**
   * Drops from memory the tiles and bundles that were full at tree size `written`: the caller wrote every one of them
   * to the log folder (or found it there, checked), except those named in `kept` ("<level>/<index>"), which stay
   * until written. Tiles that filled after `written` stay.
   */
  dropWritten(written: number, kept: ReadonlySet<string> = new Set()): void {
    if (this.stored === undefined) throw new InvariantError('a tree without a log folder keeps every tile');
    const drop = (tiles: Map<number, Buffer>, level: number | 'entries') => {
      const full = Math.floor(TiledTree.countAt(level, Math.min(written, this.size)) / TILE_WIDTH);
      for (const index of tiles.keys()) if (index < full && !kept.has(`${level}/${index}`)) tiles.delete(index);
    };
    drop(this.bundles, 'entries');
    this.levels.forEach(drop);
  }

  /** How many tiles and bundles are in memory: those held (the right edge, and full ones not yet written) and those read back. */
  get tilesInMemory(): number {
    return this.bundles.size + this.levels.reduce((n, tiles) => n + tiles.size, 0) + (this.stored?.size ?? 0);
  }

  /** The whole tile (or bundle) at `level` and `index`: held, or read back from the log folder and checked. */
  private tileAt(level: number | 'entries', index: number): Buffer {
    const held = (level === 'entries' ? this.bundles : this.levels[level])?.get(index);
    if (held !== undefined) return held;
    if (this.stored === undefined) throw new RangeError(`no tile ${level}/${index}`);
    if (level === 'entries') {
      return this.stored.read(level, index, TILE_WIDTH * BUNDLED, (bundle) => {
        const leaves = this.tileAt(0, index);
        let entries: Buffer[];
        try {
          entries = parseEntryBundle(bundle);
        } catch (err) {
          return `is not an entry bundle (${(err as Error).message})`;
        }
        return entries.every((entry, i) => leafHash(entry).equals(leaves.subarray(i * HASH_BYTES, (i + 1) * HASH_BYTES)))
          ? undefined
          : 'holds entries the level-0 tile does not hash';
      });
    }
    return this.stored.read(level, index, TILE_BYTES, (tile) => {
      const above = this.tileAt(level + 1, Math.floor(index / TILE_WIDTH));
      const at = (index % TILE_WIDTH) * HASH_BYTES;
      return hashOfRun(tile, 0, TILE_WIDTH).equals(above.subarray(at, at + HASH_BYTES)) ? undefined : `does not hash to its hash in tile level ${level + 1}`;
    });
  }

  /** The bytes of a tile or entry bundle of the tree at `size` (default: its current size), or undefined when the tree had not that many hashes there. */
  read(tile: TileRef, size = this.size): Buffer | undefined {
    const available = TiledTree.countAt(tile.level, Math.min(size, this.size)) - tile.index * TILE_WIDTH;
    if (available < tile.width) return undefined;
    return this.tileAt(tile.level, tile.index).subarray(0, tile.width * (tile.level === 'entries' ? BUNDLED : HASH_BYTES));
  }

  /** The leaf data (entry) at `index`. */
  entry(index: number): Buffer {
    const at = (index % TILE_WIDTH) * BUNDLED + 2;
    return this.tileAt('entries', Math.floor(index / TILE_WIDTH)).subarray(at, at + ENTRY_BYTES);
  }

  /** Complete-subtree hashes below the current size, for roots and proofs (src/protocol/tlog/tree-hashes.ts). */
  readonly reader: HashReader = (level, index) => {
    const tileLevel = Math.floor(level / TILE_HEIGHT);
    const count = 2 ** (level % TILE_HEIGHT);
    const first = index * count;
    if ((index + 1) * count > TiledTree.countAt(tileLevel, this.size)) throw new RangeError(`no hash at level ${level} index ${index}`);
    return hashOfRun(this.tileAt(tileLevel, Math.floor(first / TILE_WIDTH)), first % TILE_WIDTH, count);
  };
}
