import { mkdir, open, readdir, readFile, rename, rmdir, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { TILE_WIDTH, parseTilePath, tilePath, tilesOfTree, type TileRef } from '../protocol/tlog/tile-path.ts';
import { TiledTree } from './tiled-tree.ts';
import { parseEntryBundle } from '../protocol/tlog/entry-bundle.ts';
import { SigilError } from '../protocol/sigil-error.ts';

/**
 * The log on disk, laid out as its URLs (docs/log.md#on-disk): `tile/...` and `tile/entries/...` as C2SP tlog-tiles
 * paths, `checkpoint`, and `log.json` (origin and every log key that signed). Public and tamper-evident, so it may live
 * outside the enclave: on start the tree is rebuilt from the entry bundles and every stored tile must match it.
 */

/** Writes a file so that a crash leaves either the old or the new bytes: a temporary file, synced, renamed over. */
export async function writeDurably(path: string, bytes: Uint8Array | string): Promise<void> {
  const temporary = `${path}.tmp`;
  const handle = await open(temporary, 'w').catch(async (err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOENT') throw err;
    await mkdir(dirname(path), { recursive: true });
    return open(temporary, 'w');
  });
  try {
    await handle.writeFile(bytes);
    await handle.datasync();
  } finally {
    await handle.close();
  }
  await rename(temporary, path);
}

/**
 * What to write when the tree grew from `from` entries to its current size: the entry bundles and Merkle tiles that
 * changed, partial ones too (the folder is a complete log a static server can mirror), each with its width at `from`.
 */
function changedTiles(tree: TiledTree, from: number): Array<{ tile: TileRef; before: number }> {
  const changed: Array<{ tile: TileRef; before: number }> = [];
  const levels: Array<number | 'entries'> = ['entries'];
  for (let level = 0; TiledTree.countAt(level, tree.size) > 0; level++) levels.push(level);
  for (const level of levels) {
    const before = TiledTree.countAt(level, from);
    const after = TiledTree.countAt(level, tree.size);
    if (after === before) continue;
    for (let index = Math.floor(before / TILE_WIDTH); index * TILE_WIDTH < after; index++) {
      const width = Math.min(TILE_WIDTH, after - index * TILE_WIDTH);
      changed.push({ tile: { level, index, width }, before: Math.max(0, Math.min(TILE_WIDTH, before - index * TILE_WIDTH)) });
    }
  }
  return changed;
}

const ignoreMissing = (err: NodeJS.ErrnoException) => {
  if (err.code !== 'ENOENT' && err.code !== 'ENOTEMPTY') throw err;
};

/**
 * Writes what changed since `from`: the entry bundles and Merkle tiles, the newest partial ones included; then the
 * partial copy each one replaces is dropped, so the folder keeps one partial tile per level (docs/log.md#mirroring).
 * Sigil itself serves partial tiles of every checkpointed width from memory.
 */
export async function persistTiles(dir: string, tree: TiledTree, from: number): Promise<void> {
  // All at once: each file is still written, synced and renamed before its stale partial copy goes, but syncs issued
  // together share the file system's journal commits, which costs less CPU than one commit per file in turn.
  await Promise.all(
    changedTiles(tree, from).map(async ({ tile, before }) => {
      await writeDurably(join(dir, tilePath(tile)), tree.read(tile)!);
      if (before > 0 && before < TILE_WIDTH) await unlink(join(dir, tilePath({ ...tile, width: before }))).catch(ignoreMissing);
      if (tile.width === TILE_WIDTH && before > 0) await rmdir(join(dir, tilePath(tile) + '.p')).catch(ignoreMissing);
    }),
  );
}

/** Every stored tile and bundle, by its path, widest copy of each index; `narrower` lists the other copies (a crash's leftovers). */
async function storedTiles(dir: string): Promise<{ found: Map<string, TileRef>; narrower: TileRef[] }> {
  const found = new Map<string, TileRef>();
  const narrower: TileRef[] = [];
  let names: string[];
  try {
    names = (await readdir(join(dir, 'tile'), { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { found, narrower };
    throw err;
  }
  for (const name of names) {
    const relative = name
      .slice(dir.length + 1)
      .split('\\')
      .join('/');
    if (relative.endsWith('.tmp')) continue;
    const tile = parseTilePath(relative);
    const key = `${tile.level}/${tile.index}`;
    const known = found.get(key);
    if (known === undefined || tile.width > known.width) {
      if (known !== undefined) narrower.push(known);
      found.set(key, tile);
    } else narrower.push(tile);
  }
  return { found, narrower };
}

/** A stored log that does not hold together: Sigil refuses to start on it (docs/log.md#lost-or-corrupted). */
export class StoredLogError extends SigilError<'ERR_LOG_STORED_INVALID'> {
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_LOG_STORED_INVALID', message, options);
  }
}

/**
 * Rebuilds the tree from the stored entry bundles (contiguous from 0, only the last one partial), then checks
 * every stored Merkle tile against it, byte for byte. Each full tile is checked as the rebuild completes it and then
 * dropped from memory (docs/log.md#memory); one the disk lacks stays in memory until it is written (`writeTiles`).
 * `stale` names the partial copies a crash can leave behind: narrower ones, and partial Merkle tiles (derived data)
 * wider than the entries written before the crash; no checkpoint covers them, so they go (`dropTiles`).
 */
export async function loadStoredTree(dir: string): Promise<{ tree: TiledTree; missing: TileRef[]; stale: TileRef[] }> {
  const { found: stored, narrower } = await storedTiles(dir);
  const stale = narrower.filter((tile) => tile.width < TILE_WIDTH);
  const tree = new TiledTree(dir);
  const missing: TileRef[] = [];
  const kept = new Set<string>();
  const compare = async (tile: TileRef) => {
    if (!tree.read(tile)!.equals(await readFile(join(dir, tilePath(tile)))))
      throw new StoredLogError(`${tilePath(tile)} does not match the hashes of the stored entries: the log was altered`);
  };
  for (let index = 0; ; index++) {
    const bundle = stored.get(`entries/${index}`);
    if (bundle === undefined) break;
    if (tree.size !== index * TILE_WIDTH) throw new StoredLogError(`entry bundle ${index} follows a partial bundle: entries are missing`);
    const entries = parseEntryBundle(await readFile(join(dir, tilePath(bundle))));
    if (entries.length !== bundle.width) throw new StoredLogError(`${tilePath(bundle)} holds ${entries.length} entries, not ${bundle.width}`);
    for (const entry of entries) tree.append(entry);
    // The Merkle tiles this bundle completed: checked against their files while in memory, or missing.
    for (let level = 0, span = TILE_WIDTH; bundle.width === TILE_WIDTH && tree.size % span === 0; level++, span *= TILE_WIDTH) {
      const tile = { level, index: tree.size / span - 1, width: TILE_WIDTH };
      if (stored.get(`${level}/${tile.index}`)?.width === TILE_WIDTH) await compare(tile);
      // A full tile the entries imply but the disk lacks (a crash between two writes, or a deleted file) is written again from them.
      else {
        missing.push(tile);
        kept.add(`${level}/${tile.index}`);
      }
    }
    tree.dropWritten(tree.size, kept);
  }
  for (const tile of stored.values()) {
    if (tile.level === 'entries') {
      if (tile.index * TILE_WIDTH >= tree.size) throw new StoredLogError(`${tilePath(tile)} is stored but an earlier entry bundle is missing`);
      continue;
    }
    if (tile.width === TILE_WIDTH && tile.index * TILE_WIDTH + TILE_WIDTH <= TiledTree.countAt(tile.level, tree.size)) continue; // compared above
    if (tile.width < TILE_WIDTH && tree.read(tile) === undefined) {
      stale.push(tile);
      continue;
    }
    if (tree.read(tile) === undefined) throw new StoredLogError(`${tilePath(tile)} covers entries the stored entry bundles do not hold: entries were lost`);
    await compare(tile);
  }
  return { tree, missing, stale };
}

/** Writes the given tiles of the tree. */
export async function writeTiles(dir: string, tree: TiledTree, tiles: readonly TileRef[]): Promise<void> {
  await Promise.all(tiles.map((tile) => writeDurably(join(dir, tilePath(tile)), tree.read(tile)!)));
}

/** The partial tiles of the tree at its size, at every Merkle level (the partial entry bundle is written with its entries). */
export function partialTiles(tree: TiledTree): TileRef[] {
  return tilesOfTree(tree.size).filter((tile) => tile.width < TILE_WIDTH);
}

/** Deletes the given tile files (stale partial copies). */
export async function dropTiles(dir: string, tiles: readonly TileRef[]): Promise<void> {
  await Promise.all(tiles.map((tile) => unlink(join(dir, tilePath(tile))).catch(ignoreMissing)));
}
