import { createHash } from 'node:crypto';
import { beforeDeadline, deadlineError, isBoundedReadError, readDeadline, readResponseBounded } from '../bounded-read.ts';
import { TlogError } from '../../protocol/tlog/errors.ts';
import { openCheckpoint, type VerifiedCheckpoint, type WitnessPolicy } from '../../protocol/tlog/checkpoint.ts';
import { parseEntryBundle } from '../../protocol/tlog/entry-bundle.ts';
import { HASH_BYTES, leafHash, verifyConsistency, verifyInclusion } from '../../protocol/tlog/merkle.ts';
import type { NoteVerifier } from '../../protocol/tlog/note.ts';
import { hashOfRun, tileLevelsReader } from '../../protocol/tlog/tile-hashes.ts';
import { TILE_WIDTH, tilePath, tilesOfTree, type TileRef } from '../../protocol/tlog/tile-path.ts';
import { rootHash } from '../../protocol/tlog/tree-hashes.ts';

/**
 * The verifier's side of Sigil's transparency log (docs/log.md): fetch a log's checkpoint, tiles and proofs over
 * HTTP and check them with code that did not make them. Imports nothing from the server.
 */

/** The log a verifier trusts: where it is served, its origin, and the key that signs its checkpoints. */
export interface TrustedLog {
  /** The log's URL prefix, e.g. https://sigil.example/v1/log (no trailing slash needed). */
  url: string;
  origin: string;
  key: NoteVerifier;
  witnesses?: WitnessPolicy;
  fetch?: typeof fetch;
  /** The deadline of each request, connecting and reading the body alike, in milliseconds; default LOG_FETCH_DEADLINE_MS. */
  deadlineMs?: number;
}

/** A log answers from static files or one tree walk: 30 s is many times what either costs. */
export const LOG_FETCH_DEADLINE_MS = 30_000;
/** A full tile is 256 hashes of 32 bytes (C2SP tlog-tiles); an entry bundle 256 entries of a 2-byte length and 32 bytes. */
export const MAX_TILE_BYTES = 256 * 32;
export const MAX_ENTRY_BUNDLE_BYTES = 256 * (2 + 32);
/** A signed note of a few lines and its signatures, witnesses' included. */
export const MAX_CHECKPOINT_BYTES = 64 * 1024;
/** An answer of inclusion or consistency proofs: at most 63 hashes a proof, a few proofs. */
export const MAX_PROOF_ANSWER_BYTES = 1024 * 1024;

function resource(log: TrustedLog, path: string): string {
  return `${log.url.replace(/\/+$/, '')}/${path}`;
}

/** What a resource of the log is called in an error, and the most bytes it may have. */
function boundsOf(path: string): { what: string; maxBytes: number } {
  if (path === 'checkpoint') return { what: "the log's checkpoint", maxBytes: MAX_CHECKPOINT_BYTES };
  if (path.startsWith('tile/entries/')) return { what: `the log's entry bundle ${path}`, maxBytes: MAX_ENTRY_BUNDLE_BYTES };
  if (path.startsWith('tile/')) return { what: `the log's ${path}`, maxBytes: MAX_TILE_BYTES };
  return { what: `the log's answer to ${path.split('?')[0]!}`, maxBytes: MAX_PROOF_ANSWER_BYTES };
}

interface LogAnswer {
  status: number;
  contentType: string | null;
  body: Buffer;
}

/** GET a resource of the log under its cap and the request's deadline; any failure is an ERR_TLOG_FETCH naming it. */
async function get(log: TrustedLog, path: string): Promise<LogAnswer> {
  const bounds = boundsOf(path);
  const deadline = readDeadline(log.deadlineMs ?? LOG_FETCH_DEADLINE_MS);
  try {
    const res = await beforeDeadline(bounds.what, deadline, (log.fetch ?? fetch)(resource(log, path), { signal: deadline.signal }));
    return { status: res.status, contentType: res.headers.get('content-type'), body: await readResponseBounded(res, { ...bounds, deadline }) };
  } catch (err) {
    const reason = deadline.signal.aborted && !isBoundedReadError(err) ? deadlineError(bounds.what, deadline) : (err as Error);
    throw new TlogError('ERR_TLOG_FETCH', `GET ${resource(log, path)} failed: ${reason.message}`);
  }
}

async function getOk(log: TrustedLog, path: string): Promise<LogAnswer> {
  const answer = await get(log, path);
  if (answer.status < 200 || answer.status > 299) throw new TlogError('ERR_TLOG_FETCH', `GET ${resource(log, path)} answered ${answer.status}`);
  return answer;
}

const bytesOf = async (log: TrustedLog, path: string) => (await getOk(log, path)).body;

/** A JSON answer of the log (a proof), refused unless it comes as application/json and parses. */
function parsedJson<T>(log: TrustedLog, path: string, answer: LogAnswer): T {
  const type = (answer.contentType ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json')
    throw new TlogError(
      'ERR_TLOG_FETCH',
      `GET ${resource(log, path)} came as ${JSON.stringify(answer.contentType ?? 'no content type')}, not application/json`,
    );
  try {
    return JSON.parse(answer.body.toString('utf8')) as T;
  } catch {
    throw new TlogError('ERR_TLOG_FETCH', `GET ${resource(log, path)} is not JSON`);
  }
}

const jsonOf = async <T>(log: TrustedLog, path: string) => parsedJson<T>(log, path, await getOk(log, path));
const fromBase64 = (hashes: unknown): Buffer[] => {
  if (!Array.isArray(hashes) || !hashes.every((h) => typeof h === 'string')) throw new TlogError('ERR_TLOG_PROOF', 'the proof is not a list of base64 hashes');
  return hashes.map((h: string) => Buffer.from(h, 'base64'));
};

/** Opens a signed checkpoint of the log (signed by its key, of its origin, cosigned by enough witnesses). */
export function openLogCheckpoint(log: TrustedLog, note: string): VerifiedCheckpoint {
  return openCheckpoint(note, log.key, log.origin, log.witnesses);
}

/** The log's latest checkpoint as served (a signed note, not yet opened), under the checkpoint's cap and deadline. */
export async function fetchCheckpointNote(log: TrustedLog): Promise<string> {
  return (await bytesOf(log, 'checkpoint')).toString('utf8');
}

/** Fetches and opens the log's latest checkpoint. */
export async function fetchCheckpoint(log: TrustedLog): Promise<VerifiedCheckpoint> {
  return openLogCheckpoint(log, await fetchCheckpointNote(log));
}

/** The log entry of a receipt: SHA-256 of its compact JWS bytes. */
export function receiptEntry(jws: string): Buffer {
  return createHash('sha256').update(jws).digest();
}

/** The receipt id a compact JWS's payload names, if it names one. */
export function receiptIdOf(jws: string): string | undefined {
  try {
    const claims = JSON.parse(Buffer.from(jws.split('.')[1] ?? '', 'base64url').toString('utf8')) as { receipt_id?: unknown };
    return typeof claims.receipt_id === 'string' ? claims.receipt_id : undefined;
  } catch {
    return undefined;
  }
}

/** The log's tree has no leaf where the receipt was looked for: not logged there, or its batch is not integrated yet. */
export class LeafNotFound extends TlogError {
  constructor(message: string) {
    super('ERR_TLOG_PROOF', message);
  }
}

export interface ReceiptInclusion {
  index: number;
  checkpoint: VerifiedCheckpoint;
}

/**
 * Checks that a receipt is in the log: the log's inclusion proof for its leaf (by `index`, else by the receipt's
 * id) leads from SHA-256 of the receipt to the root of `checkpoint` (default: the log's latest, checked here).
 */
export async function verifyReceiptInLog(
  log: TrustedLog,
  jws: string,
  options: { index?: number; checkpoint?: VerifiedCheckpoint } = {},
): Promise<ReceiptInclusion> {
  const checkpoint = options.checkpoint ?? (await fetchCheckpoint(log));
  const id = receiptIdOf(jws);
  const query = options.index !== undefined ? `index=${options.index}` : id !== undefined ? `receipt_id=${encodeURIComponent(id)}` : undefined;
  if (query === undefined) throw new TlogError('ERR_TLOG_PROOF', 'the receipt names no receipt_id and no leaf index was given');
  type ProofAnswer = { tree_size?: unknown; proofs?: Array<{ index?: unknown; entry?: unknown; proof?: unknown }> };
  const path = `proof?${query}&size=${checkpoint.size}`;
  const res = await get(log, path);
  if (res.status === 404) {
    throw new LeafNotFound(
      `the log's tree of ${checkpoint.size} entries has no leaf at ${query.replace('=', ' ')}: the receipt is not logged there (or not yet integrated)`,
    );
  }
  if (res.status < 200 || res.status > 299) throw new TlogError('ERR_TLOG_FETCH', `GET ${resource(log, 'proof')} answered ${res.status}`);
  const answer = parsedJson<ProofAnswer>(log, path, res);
  const entry = receiptEntry(jws);
  const mine = (answer.proofs ?? []).find((p) => typeof p.entry === 'string' && Buffer.from(p.entry, 'base64').equals(entry));
  if (mine === undefined || typeof mine.index !== 'number') {
    throw new TlogError(
      'ERR_TLOG_PROOF',
      `the log holds no entry equal to SHA-256 of this receipt at ${query.replace('=', ' ')}: the receipt was not logged there`,
    );
  }
  verifyInclusion(mine.index, checkpoint.size, leafHash(entry), fromBase64(mine.proof), checkpoint.root);
  return { index: mine.index, checkpoint };
}

/**
 * Checks that `newer` extends `older` (same origin), with the log's consistency proof; a smaller newer tree, or
 * two roots for one size, is a fork or a rollback and is refused.
 */
export async function verifyLogConsistency(log: TrustedLog, older: { size: number; root: Buffer }, newer: { size: number; root: Buffer }): Promise<void> {
  if (newer.size < older.size)
    throw new TlogError('ERR_TLOG_PROOF', `the log now shows ${newer.size} entries after showing ${older.size}: it was truncated or shows a split view`);
  const proof =
    newer.size === older.size || older.size === 0
      ? []
      : fromBase64((await jsonOf<{ proof?: unknown }>(log, `consistency?from=${older.size}&to=${newer.size}`)).proof);
  verifyConsistency(older.size, newer.size, proof, older.root, newer.root);
}

/** Requests in flight at once while a whole log is read. */
const FETCHES_AT_ONCE = 16;

export interface WholeLogReport {
  checkpoint: VerifiedCheckpoint;
  entries: number;
  tiles: number;
}

/**
 * `sigil log verify`: fetches every entry bundle and Merkle tile of the checkpoint's tree, checks that each entry is
 * well formed (a 32-byte receipt hash), that each tile holds exactly the hashes recomputed from the entries below it,
 * and that they hash to the checkpoint's root.
 */
export async function verifyWholeLog(
  log: TrustedLog,
  checkpoint?: VerifiedCheckpoint,
  onProgress?: (done: number, total: number) => void,
): Promise<WholeLogReport> {
  const cp = checkpoint ?? (await fetchCheckpoint(log));
  const levels: Buffer[] = [];
  const tiles = tilesOfTree(cp.size);
  const leafTiles = tiles.filter((t) => t.level === 0);
  const leaves: Buffer[] = [];
  // Entries first, a few bundles at a time: each bundle's leaf hashes must be the level-0 tile's.
  for (let first = 0; first < leafTiles.length; first += FETCHES_AT_ONCE) {
    const some = leafTiles.slice(first, first + FETCHES_AT_ONCE).map((t): TileRef => ({ level: 'entries', index: t.index, width: t.width }));
    const bundles = await Promise.all(some.map((b) => bytesOf(log, tilePath(b))));
    for (const [i, bundle] of some.entries()) {
      const entries = parseEntryBundle(bundles[i]!);
      if (entries.length !== bundle.width) throw new TlogError('ERR_TLOG_TILE', `${tilePath(bundle)} holds ${entries.length} entries, not ${bundle.width}`);
      leaves.push(Buffer.concat(entries.map(leafHash)));
    }
    onProgress?.(Math.min(first + FETCHES_AT_ONCE, leafTiles.length), leafTiles.length);
  }
  levels[0] = Buffer.concat(leaves);
  for (let level = 0; level < 64; level++) {
    const here = tiles.filter((t) => t.level === level);
    if (here.length === 0) break;
    const expected = levels[level]!;
    const served: Buffer[] = [];
    for (let first = 0; first < here.length; first += FETCHES_AT_ONCE)
      served.push(...(await Promise.all(here.slice(first, first + FETCHES_AT_ONCE).map((t) => bytesOf(log, tilePath(t))))));
    for (const [i, t] of here.entries()) {
      const want = expected.subarray(t.index * TILE_WIDTH * HASH_BYTES, (t.index * TILE_WIDTH + t.width) * HASH_BYTES);
      if (!served[i]!.equals(want))
        throw new TlogError('ERR_TLOG_TILE', `${tilePath(t)} does not hold the hashes of the entries below it: the tile was tampered with`);
    }
    // The level above holds the hash of each full tile of this one.
    const full = Math.floor(expected.length / HASH_BYTES / TILE_WIDTH);
    if (full > 0) levels[level + 1] = Buffer.concat(Array.from({ length: full }, (_, n) => hashOfRun(expected, n * TILE_WIDTH, TILE_WIDTH)));
  }
  const root = rootHash(tileLevelsReader(levels), cp.size);
  if (!root.equals(cp.root))
    throw new TlogError(
      'ERR_TLOG_TILE',
      `the ${cp.size} entries hash to ${root.toString('base64')}, not to the checkpoint's root ${cp.root.toString('base64')}`,
    );
  return { checkpoint: cp, entries: cp.size, tiles: tiles.length + leafTiles.length };
}
