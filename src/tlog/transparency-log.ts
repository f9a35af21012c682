import { hash, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../log/logger.ts';
import { checkpointText, parseCheckpoint } from '../verify/tlog/checkpoint.ts';
import { openNote, parseVerifierKey } from '../verify/tlog/note.ts';
import type { TileRef } from '../verify/tlog/tile-path.ts';
import { ENTRY_BYTES } from '../verify/tlog/entry-bundle.ts';
import { consistencyProof, inclusionProof, rootHash } from '../verify/tlog/tree-hashes.ts';
import { generateLogKey, signNote, type LogKey } from './log-key.ts';
import { dropTiles, loadStoredTree, partialTiles, persistTiles, StoredLogError, writeDurably, writeTiles } from './tile-files.ts';
import { isBase64Entry, TiledTree } from './tiled-tree.ts';
import { StoredTileError } from './stored-tiles.ts';
import { lockLogFolder } from './folder-lock.ts';
import { WitnessPush, type WitnessTarget } from './witness-push.ts';

export interface TransparencyLogOptions {
  /** The folder the log lives in (tiles, checkpoint, log.json). */
  dir: string;
  /** The first part of a new log's origin; a random log ID follows it. */
  originPrefix: string;
  /** How often pending entries are integrated and one checkpoint signed for all of them. */
  batchMs: number;
  /** How many recent receipt ids are remembered with their leaf indexes. */
  idsKept: number;
  logger: Logger;
  /** The witnesses each new checkpoint is pushed to, and how many must cosign (docs/log.md#witnesses); absent: none. */
  witnesses?: { targets: readonly WitnessTarget[]; quorum: number; timeoutMs: number };
}

/** log.json: who this log is, and every key that ever signed one of its checkpoints (public; docs/log.md#on-disk). */
interface LogIdentity {
  origin: string;
  created: string;
  keys: string[];
}

/** A signed checkpoint and the tree size it covers. */
export interface Published {
  size: number;
  note: string;
}

/**
 * Sigil's transparency log (docs/log.md): each receipt appended on the request's path is a hash pushed onto an
 * array and an index handed back; a sequencer integrates the pending hashes every `batchMs`, writes the tiles,
 * and signs one checkpoint for the batch with a key made in the enclave at this start.
 */
export class TransparencyLog {
  readonly origin: string;
  readonly key: LogKey;
  private readonly tree: TiledTree;
  /** Entries appended since the last batch, in base64: a string per entry costs the heap less than a Buffer. */
  private pending: string[] = [];
  private next: number;
  private persisted: number;
  private published: Published;
  private integrating: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly options: TransparencyLogOptions;
  /** Recent receipt ids and their leaf indexes (a model and a message receipt share an id): one index as is, no array for it. */
  private readonly ids = new Map<string, number | number[]>();
  /** The same ids in a ring, oldest overwritten first: a Map's own order would cost a scan past its deleted entries. */
  private readonly idRing: Array<string | undefined>;
  private idAt = 0;
  /** Gives the log folder back (folder-lock.ts); set by open. */
  private release: () => void = () => undefined;
  /** Pushes each published checkpoint to the witnesses; set by open when witnesses are configured. */
  private witnessPush: WitnessPush | undefined;

  private constructor(options: TransparencyLogOptions, origin: string, key: LogKey, tree: TiledTree, published: Published) {
    this.options = options;
    this.origin = origin;
    this.key = key;
    this.tree = tree;
    this.next = tree.size;
    this.persisted = tree.size;
    this.published = published;
    this.idRing = new Array<string | undefined>(options.idsKept);
  }

  /**
   * Opens the log in `dir`, or creates a new one with a new origin when the folder holds none. A stored log is
   * checked first (entries, tiles, the last checkpoint's root and signature); one that does not hold together is
   * refused with StoredLogError, never truncated or forked. Then a new key signs a checkpoint that extends it.
   */
  static async open(options: TransparencyLogOptions): Promise<TransparencyLog> {
    let opened: TransparencyLog | undefined;
    // Made first, so a bad witness key (WitnessKeyError) changes nothing in the folder.
    const witnessPush =
      options.witnesses === undefined || options.witnesses.targets.length === 0
        ? undefined
        : new WitnessPush({
            dir: options.dir,
            witnesses: options.witnesses.targets,
            quorum: options.witnesses.quorum,
            timeoutMs: options.witnesses.timeoutMs,
            logger: options.logger,
            consistency: (from, to) => opened?.consistency(from, to),
          });
    const release = lockLogFolder(options.dir);
    try {
      const log = await TransparencyLog.openLocked(options);
      log.release = release;
      await witnessPush?.load();
      log.witnessPush = witnessPush;
      opened = log;
      return log;
    } catch (err) {
      release();
      throw err;
    }
  }

  private static async openLocked(options: TransparencyLogOptions): Promise<TransparencyLog> {
    const identity = await readIdentity(options.dir);
    let origin: string;
    let keys: string[];
    let tree: TiledTree;
    if (identity === undefined) {
      origin = `${options.originPrefix}/${randomBytes(8).toString('hex')}`;
      keys = [];
      const { tree: stored } = await loadStoredTree(options.dir);
      if (stored.size > 0) throw new StoredLogError(`${options.dir} holds entries but no log.json: the log's origin and keys were lost`);
      tree = stored;
    } else {
      ({ origin, keys } = identity);
      const loaded = await loadStoredTree(options.dir);
      tree = loaded.tree;
      await checkStoredCheckpoint(options.dir, identity, tree);
      await dropTiles(options.dir, loaded.stale);
      await writeTiles(options.dir, tree, [...loaded.missing, ...partialTiles(tree)]);
      tree.dropWritten(tree.size);
    }
    const key = generateLogKey(origin);
    await writeDurably(
      join(options.dir, 'log.json'),
      JSON.stringify({ origin, created: identity?.created ?? new Date().toISOString(), keys: [...keys, key.vkey] }, null, 2) + '\n',
    );
    const note = signNote(checkpointText(origin, tree.size, rootHash(tree.reader, tree.size)), key);
    await writeDurably(join(options.dir, 'checkpoint'), note);
    const log = new TransparencyLog(options, origin, key, tree, { size: tree.size, note });
    options.logger.info(
      { origin, size: tree.size, vkey: key.vkey },
      identity === undefined ? 'transparency log created' : 'transparency log checked and reopened',
    );
    return log;
  }

  /** Starts integrating every `batchMs`. */
  start(): void {
    this.timer ??= setInterval(() => void this.integrate(), this.options.batchMs);
    this.timer.unref();
    this.witnessPush?.push(this.published);
  }

  /**
   * The request's part: the entry is SHA-256 of the receipt's compact JWS (the log shows nothing of the receipt
   * to whoever does not hold it); returns the leaf index the entry will have.
   */
  append(jws: string, receiptId?: string): number {
    return this.appendPending(hash('sha256', jws, 'base64'), receiptId);
  }

  /**
   * Appends an entry hashed elsewhere: 32 bytes, the SHA-256 of a receipt, or the same in base64 as a worker sends it
   * (src/workers); returns its leaf index.
   */
  appendEntry(entry: Uint8Array | string, receiptId?: string): number {
    if (typeof entry === 'string' ? !isBase64Entry(entry) : entry.length !== ENTRY_BYTES) throw new RangeError(`a log entry is ${ENTRY_BYTES} bytes`);
    return this.appendPending(typeof entry === 'string' ? entry : Buffer.from(entry.buffer, entry.byteOffset, entry.length).toString('base64'), receiptId);
  }

  private appendPending(entry: string, receiptId: string | undefined): number {
    this.pending.push(entry);
    const index = this.next++;
    if (receiptId !== undefined && receiptId !== '') {
      const known = this.ids.get(receiptId);
      if (typeof known === 'number') this.ids.set(receiptId, [known, index]);
      else if (known !== undefined) known.push(index);
      else {
        const oldest = this.idRing[this.idAt];
        if (oldest !== undefined) this.ids.delete(oldest);
        this.idRing[this.idAt] = receiptId;
        this.idAt = (this.idAt + 1) % this.idRing.length;
        this.ids.set(receiptId, index);
      }
    }
    return index;
  }

  /** The leaf indexes of a recent receipt id, or undefined when the log does not remember it. */
  indexesOf(receiptId: string): readonly number[] | undefined {
    const known = this.ids.get(receiptId);
    return typeof known === 'number' ? [known] : known;
  }

  /** The latest signed checkpoint. */
  get checkpoint(): Published {
    return this.published;
  }

  /** The newest checkpoint a quorum of witnesses cosigned (`checkpoint.cosigned`), or undefined when none has. */
  get cosignedCheckpoint(): string | undefined {
    return this.witnessPush?.cosigned;
  }

  /** Resolves once every checkpoint published so far was pushed to the witnesses (or none are configured). */
  async witnessed(): Promise<void> {
    await this.witnessPush?.settled();
  }

  /** How many tiles and entry bundles the log holds in memory (docs/log.md#memory). */
  get tilesInMemory(): number {
    return this.tree.tilesInMemory;
  }

  /**
   * A tile or entry bundle of the published tree; undefined when the published tree does not have it. Here and in
   * the proofs, a tile read back from the folder that is missing or altered throws StoredTileError.
   */
  tile(tile: TileRef): Buffer | undefined {
    return this.readingBack(() => this.tree.read(tile, this.published.size));
  }

  /** The inclusion proof of leaf `index` in the published tree of `size` (default: the latest), and the entry there. */
  inclusion(index: number, size = this.published.size): { entry: Buffer; proof: Buffer[] } | undefined {
    if (!(index >= 0 && index < size && size <= this.published.size)) return undefined;
    return this.readingBack(() => ({ entry: this.tree.entry(index), proof: inclusionProof(this.tree.reader, index, size) }));
  }

  /** The consistency proof between two published tree sizes. */
  consistency(from: number, to = this.published.size): Buffer[] | undefined {
    if (!(from >= 0 && from <= to && to <= this.published.size)) return undefined;
    return this.readingBack(() => consistencyProof(this.tree.reader, from, to));
  }

  /** Runs a read of the tree; a tile refused on reading it back is logged for the operator, then thrown. */
  private readingBack<T>(read: () => T): T {
    try {
      return read();
    } catch (err) {
      if (err instanceof StoredTileError) this.options.logger.error({ err: err.message }, 'transparency log: a stored tile was refused on reading it back');
      throw err;
    }
  }

  /** Integrates what is pending: appends, writes the tiles, signs and writes one checkpoint, then publishes it. */
  integrate(): Promise<void> {
    this.integrating ??= this.integrateOnce().finally(() => (this.integrating = undefined));
    return this.integrating;
  }

  private async integrateOnce(): Promise<void> {
    const batch = this.pending;
    if (batch.length === 0 && this.persisted === this.tree.size) return;
    this.pending = [];
    for (const entry of batch) this.tree.appendBase64(entry);
    const size = this.tree.size;
    try {
      await persistTiles(this.options.dir, this.tree, this.persisted);
      this.persisted = size;
      this.tree.dropWritten(size);
      const note = signNote(checkpointText(this.origin, size, rootHash(this.tree.reader, size)), this.key);
      await writeDurably(join(this.options.dir, 'checkpoint'), note);
      this.published = { size, note };
      this.witnessPush?.push(this.published);
    } catch (err) {
      // Not published: the next batch writes these tiles again, with its own.
      this.options.logger.error(
        { err: (err as Error).message, size },
        'transparency log: writing tiles or the checkpoint failed; retrying with the next batch',
      );
    }
  }

  /** Stops the sequencer after integrating what is pending. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.integrating;
    try {
      await this.integrate();
      await this.witnessPush?.settled();
    } finally {
      this.release();
    }
  }
}

async function readIdentity(dir: string): Promise<LogIdentity | undefined> {
  let text: string;
  try {
    text = await readFile(join(dir, 'log.json'), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const parsed = JSON.parse(text) as Partial<LogIdentity>;
  if (typeof parsed.origin !== 'string' || !Array.isArray(parsed.keys) || typeof parsed.created !== 'string')
    throw new StoredLogError(`${dir}/log.json is not a log identity`);
  return parsed as LogIdentity;
}

/** The stored checkpoint must be signed by one of the log's keys and its root must be the root of the stored tree at its size. */
async function checkStoredCheckpoint(dir: string, identity: LogIdentity, tree: TiledTree): Promise<void> {
  let note: string;
  try {
    note = await readFile(join(dir, 'checkpoint'), 'utf8');
  } catch {
    throw new StoredLogError(`${dir}/checkpoint is missing: nothing says how far the stored log reached`);
  }
  let checkpoint;
  try {
    checkpoint = parseCheckpoint(openNote(note, identity.keys.map(parseVerifierKey)).text);
  } catch (err) {
    throw new StoredLogError(`${dir}/checkpoint: ${(err as Error).message}`);
  }
  if (checkpoint.origin !== identity.origin) throw new StoredLogError(`${dir}/checkpoint is of origin ${checkpoint.origin}, not ${identity.origin}`);
  if (checkpoint.size > tree.size)
    throw new StoredLogError(`${dir}/checkpoint covers ${checkpoint.size} entries and only ${tree.size} are stored: the log was truncated`);
  if (!rootHash(tree.reader, checkpoint.size).equals(checkpoint.root))
    throw new StoredLogError(`the stored entries do not hash to the root of ${dir}/checkpoint: the log was altered`);
}
