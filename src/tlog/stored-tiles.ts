import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { TILE_WIDTH, tilePath } from '../protocol/tlog/tile-path.ts';
import { SigilError } from '../protocol/sigil-error.ts';

/** How many full tiles read back from the log folder stay in memory (docs/log.md#memory): about 540 KiB. */
export const READ_BACK_TILES = 64;

/**
 * A full tile or entry bundle read back from the log folder that is missing, or does not hash to what the tree
 * holds above it: it is never served or used in a proof (docs/log.md#memory).
 */
export class StoredTileError extends SigilError<'ERR_LOG_TILE_INVALID'> {
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_LOG_TILE_INVALID', message, options);
  }
}

/**
 * The full tiles and entry bundles the tree no longer holds, read back from the log folder (`tile/<L>/<N>`,
 * `tile/entries/<N>`), each checked before use, the last READ_BACK_TILES of them kept, least recently used
 * dropped first. Reads are synchronous: an 8 KiB file, from the page cache when it was read or written lately
 * (docs/decisions.md, "The log's memory is bounded").
 */
export class StoredTiles {
  private readonly recent = new Map<string, Buffer>();
  private readonly dir: string;
  private readonly capacity: number;

  constructor(dir: string, capacity = READ_BACK_TILES) {
    this.dir = dir;
    this.capacity = capacity;
  }

  /** How many tiles are kept. */
  get size(): number {
    return this.recent.size;
  }

  /**
   * The full tile at `level`/`index`: kept, or read back and kept only if `check` (given its bytes) returns no
   * complaint. A complaint, a missing file or a file of the wrong length throws StoredTileError.
   */
  read(level: number | 'entries', index: number, bytes: number, check: (tile: Buffer) => string | undefined): Buffer {
    const key = `${level}/${index}`;
    const kept = this.recent.get(key);
    if (kept !== undefined) {
      this.recent.delete(key);
      this.recent.set(key, kept);
      return kept;
    }
    const path = tilePath({ level, index, width: TILE_WIDTH });
    let tile: Buffer;
    try {
      tile = readFileSync(join(this.dir, path));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') throw new StoredTileError(`${path} is missing from the log folder: it was written and is gone`);
      throw new StoredTileError(`${path} could not be read from the log folder (${code ?? (err as Error).message})`);
    }
    if (tile.length !== bytes)
      throw new StoredTileError(`${path} in the log folder is ${tile.length} bytes, not ${bytes}: it was altered after it was written`);
    const complaint = check(tile);
    if (complaint !== undefined) throw new StoredTileError(`${path} in the log folder ${complaint}: it was altered after it was written`);
    this.recent.set(key, tile);
    if (this.recent.size > this.capacity) this.recent.delete(this.recent.keys().next().value!);
    return tile;
  }
}
