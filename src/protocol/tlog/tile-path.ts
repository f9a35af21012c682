import { TlogError } from './errors.ts';

/** C2SP tlog-tiles: tiles are 256 hashes wide (8 levels of the tree), their paths under the log's prefix. */
export const TILE_HEIGHT = 8;
export const TILE_WIDTH = 256;

/** One tile resource: a Merkle tile at `level`, or the entry bundle (`level` 'entries'); `width` below 256 for a partial one. */
export interface TileRef {
  level: number | 'entries';
  index: number;
  width: number;
}

/** `<N>` as zero-padded 3-digit elements, all but the last prefixed with x: 1234067 is x001/x234/067. */
export function encodeTileIndex(index: number): string {
  const parts: string[] = [];
  let n = index;
  do {
    parts.unshift(String(n % 1000).padStart(3, '0'));
    n = Math.floor(n / 1000);
  } while (n > 0);
  return parts.map((p, i) => (i < parts.length - 1 ? `x${p}` : p)).join('/');
}

/** `tile/<L>/<N>[.p/<W>]` or `tile/entries/<N>[.p/<W>]`. */
export function tilePath(tile: TileRef): string {
  const suffix = tile.width === TILE_WIDTH ? '' : `.p/${tile.width}`;
  return `tile/${tile.level}/${encodeTileIndex(tile.index)}${suffix}`;
}

const PATH = /^tile\/(entries|0|[1-9]\d?)\/((?:x\d{3}\/)*\d{3})(?:\.p\/([1-9]\d{0,2}))?$/;

/** Reads a tile path back, refusing every form the specification does not allow (leading zeros, widths of 0 or 256 and more, levels above 63). */
export function parseTilePath(path: string): TileRef {
  const m = PATH.exec(path);
  if (m === null) throw new TlogError('ERR_TLOG_TILE', `not a tile path: ${path}`);
  const level = m[1] === 'entries' ? 'entries' : Number(m[1]);
  if (level !== 'entries' && level > 63) throw new TlogError('ERR_TLOG_TILE', `tile level ${level} is above 63`);
  const elements = m[2]!.split('/').map((e) => e.replace('x', ''));
  // Only the first element may be 000 when it is the only one: x000/123 would name 123 twice.
  if (elements.length > 1 && elements[0] === '000') throw new TlogError('ERR_TLOG_TILE', `tile index with a leading zero element: ${path}`);
  const index = elements.reduce((n, e) => n * 1000 + Number(e), 0);
  const width = m[3] === undefined ? TILE_WIDTH : Number(m[3]);
  if (m[3] !== undefined && width >= TILE_WIDTH) throw new TlogError('ERR_TLOG_TILE', `partial tile width ${width} is not below ${TILE_WIDTH}`);
  return { level, index, width };
}

/**
 * The tiles a tree of `size` leaves is served as, at each Merkle tile level: the full ones and the partial
 * rightmost one (width floor(size / 256^L) mod 256), if any.
 */
export function tilesOfTree(size: number): TileRef[] {
  const tiles: TileRef[] = [];
  for (let level = 0, count = size; count > 0; level++, count = Math.floor(count / TILE_WIDTH)) {
    const full = Math.floor(count / TILE_WIDTH);
    for (let index = 0; index < full; index++) tiles.push({ level, index, width: TILE_WIDTH });
    if (count % TILE_WIDTH > 0) tiles.push({ level, index: full, width: count % TILE_WIDTH });
  }
  return tiles;
}
