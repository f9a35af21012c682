import { hash, randomBytes, type KeyObject } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../logger/logger.ts';
import { checkpointText, parseCheckpoint } from '../protocol/tlog/checkpoint.ts';
import { openNote, parseNote, parseVerifierKey } from '../protocol/tlog/note.ts';
import type { TileRef } from '../protocol/tlog/tile-path.ts';
import { ENTRY_BYTES } from '../protocol/tlog/entry-bundle.ts';
import { consistencyProof, inclusionProof, rootHash } from '../protocol/tlog/tree-hashes.ts';
import { generateLogKey, logKeyOf, signNote, type LogKey } from './log-key.ts';
import { dropTiles, loadStoredTree, partialTiles, persistTiles, StoredLogError, writeDurably, writeTiles } from './tile-files.ts';
import { isBase64Entry, TiledTree } from './tiled-tree.ts';
import { StoredTileError } from './stored-tiles.ts';
import { lockLogFolder, type FolderLock, type FolderLockTiming } from './folder-lock.ts';
import { readLastSigned, writeLastSigned } from './signed-state.ts';
import { httpError, type HttpError } from '../protocol/errors.ts';
import { WitnessPush, type WitnessTarget } from './witness-push.ts';
import { SigilError } from '../protocol/sigil-error.ts';

export interface TransparencyLogOptions {
  /** The folder the log lives in (tiles, checkpoint, log.json). */
  dir: string;
  /** The first part of a new log's origin; a random log ID follows it. */
  originPrefix: string;
  /** The origin of a new log, instead of the prefix and a random ID; a stored log of another origin is refused. */
  origin?: string;
  /** The checkpoint key (Ed25519), the same across starts (a key file, sealed key material); absent, a new one at this start. */
  privateKey?: KeyObject;
  /** How often pending entries are integrated and one checkpoint signed for all of them. */
  batchMs: number;
  /** How many recent receipt ids are remembered with their leaf indexes. */
  idsKept: number;
  logger: Logger;
  /**
   * Where the last signed checkpoint is kept, outside `dir` (signed-state.ts): a rolled-back folder is then refused.
   * Absent: nothing outside the folder says how far the log signed, and only `checkpoint.cosigned` guards it.
   */
  statePath?: string;
  /** The key that seals the state file (derived from the sealed seed); absent on development: a plain file. */
  stateKey?: Buffer;
  /** How the folder lock is refreshed and when a silent one is taken over (folder-lock.ts); tests shorten it. */
  lockTiming?: FolderLockTiming;
  /** The witnesses each new checkpoint is pushed to, and how many must cosign (docs/log.md#witnesses); absent: none. */
  witnesses?: { targets: readonly WitnessTarget[]; quorum: number; timeoutMs: number };
}

/** A log folder that keeps another origin than the one configured: the origin is the log's name, and changing it is a new log. */
export class LogOriginMismatch extends SigilError<'ERR_LOG_ORIGIN_MISMATCH'> {
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_LOG_ORIGIN_MISMATCH', message, options);
  }
}

/** A log whose folder rolled back behind a checkpoint it or its witnesses signed: extending it would sign a fork. */
export class LogRolledBack extends SigilError<'ERR_LOG_ROLLED_BACK'> {
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_LOG_ROLLED_BACK', message, options);
  }
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
 * and signs one checkpoint for the batch with the log key (docs/log.md#identity); a receipt's index is handed out once its entry is on disk.
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
  /** The log folder's lock (folder-lock.ts); set by open. */
  private lock: FolderLock = { held: () => true, release: () => undefined };
  /** Requests waiting for their entry to be on disk, in index order. */
  private waiters: Array<{ index: number; resolve: () => void; reject: (err: HttpError) => void }> = [];
  private flushQueued = false;
  /** Batches run one after another: a flush of entries, or a flush and a checkpoint. */
  private chain: Promise<void> = Promise.resolve();
  /** Set when the lock was taken over: this log appends nothing more (fencing, docs/log.md#on-disk). */
  private fenced: HttpError | undefined;
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
   * refused with StoredLogError, never truncated or forked; one that does not extend a checkpoint the log signed before
   * (the state file, checkpoint.cosigned) with LogRolledBack. Then the log's key signs a checkpoint that extends it.
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
    const lock = lockLogFolder(options.dir, options.lockTiming);
    try {
      const log = await TransparencyLog.openLocked(options);
      log.lock = lock;
      await witnessPush?.load();
      log.witnessPush = witnessPush;
      opened = log;
      return log;
    } catch (err) {
      lock.release();
      throw err;
    }
  }

  private static async openLocked(options: TransparencyLogOptions): Promise<TransparencyLog> {
    const identity = await readIdentity(options.dir);
    let origin: string;
    let keys: string[];
    let tree: TiledTree;
    if (identity !== undefined && options.origin !== undefined && identity.origin !== options.origin)
      throw new LogOriginMismatch(
        `${options.dir} keeps the log ${identity.origin}, and transparency_log.origin is ${options.origin}: the origin is the log's name. Set it back to ${identity.origin}, or start the new log in an empty folder with a state file of its own`,
      );
    if (identity === undefined) {
      origin = options.origin ?? `${options.originPrefix}/${randomBytes(8).toString('hex')}`;
      keys = [];
      const { tree: stored } = await loadStoredTree(options.dir);
      if (stored.size > 0) throw new StoredLogError(`${options.dir} holds entries but no log.json: the log's origin and keys were lost`);
      tree = stored;
      // A folder emptied under a configured origin is a rollback to nothing when the state says that origin signed.
      await checkNotRolledBack(options, { origin, keys: [], created: '' }, tree);
    } else {
      ({ origin, keys } = identity);
      const loaded = await loadStoredTree(options.dir);
      tree = loaded.tree;
      await checkStoredCheckpoint(options.dir, identity, tree);
      await checkNotRolledBack(options, identity, tree);
      await dropTiles(options.dir, loaded.stale);
      await writeTiles(options.dir, tree, [...loaded.missing, ...partialTiles(tree)]);
      tree.dropWritten(tree.size);
    }
    const key = options.privateKey === undefined ? generateLogKey(origin) : logKeyOf(origin, options.privateKey);
    await writeDurably(
      join(options.dir, 'log.json'),
      JSON.stringify({ origin, created: identity?.created ?? new Date().toISOString(), keys: keys.includes(key.vkey) ? keys : [...keys, key.vkey] }, null, 2) +
        '\n',
    );
    const note = signNote(checkpointText(origin, tree.size, rootHash(tree.reader, tree.size)), key);
    if (options.statePath !== undefined) await writeLastSigned(options.statePath, note, options.stateKey);
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
    if (this.fenced !== undefined) throw this.fenced;
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

  /**
   * Resolves once entry `index` is on disk (its entry bundle written and synced), so a receipt carrying the index is
   * one the log holds after a crash; rejects with a 503 (`log_unavailable`) when the write failed or the folder was
   * taken over. Waiting entries are written together as soon as the previous write ends (group commit), not at the
   * next checkpoint: a receipt waits for one write, the checkpoint still comes every `batchMs`.
   */
  whenDurable(index: number): Promise<void> {
    if (index < this.persisted) return Promise.resolve();
    if (this.fenced !== undefined) return Promise.reject(this.fenced);
    return new Promise<void>((resolve, reject) => {
      this.waiters.push({ index, resolve, reject });
      if (this.flushQueued) return;
      this.flushQueued = true;
      setImmediate(() => {
        this.flushQueued = false;
        void this.inTurn(() => this.flush());
      });
    });
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
    this.integrating ??= this.inTurn(async () => {
      await this.flush();
      await this.signCheckpoint();
    }).finally(() => (this.integrating = undefined));
    return this.integrating;
  }

  /** Runs `step` after the steps before it: two batches never write the folder at once. */
  private inTurn(step: () => Promise<void>): Promise<void> {
    const done = this.chain.then(step);
    this.chain = done.catch(() => undefined);
    return done;
  }

  /** Whether the folder lock is still this log's; the first time it is not, everything waiting is refused. */
  private stillHeld(): boolean {
    if (this.fenced !== undefined) return false;
    if (this.lock.held()) return true;
    this.fenced = httpError(
      'log_unavailable',
      "This server no longer keeps its transparency log (another Sigil took the log folder over), so it gives no receipt the log would not hold. Retry: the service's other instance answers.",
    );
    clearInterval(this.timer);
    this.pending = [];
    this.options.logger.error({ dir: this.options.dir }, 'transparency log: the folder lock was taken over by another Sigil; this one stops appending');
    this.settle(Infinity, this.fenced);
    return false;
  }

  /** Resolves (or, with `err`, rejects) the waiters of entries below `size`. */
  private settle(size: number, err?: HttpError): void {
    let done = 0;
    while (done < this.waiters.length && this.waiters[done]!.index < size) done++;
    const settled = this.waiters.splice(0, done);
    for (const w of settled) {
      if (err === undefined) w.resolve();
      else w.reject(err);
    }
  }

  /** Appends what is pending to the tree and writes the changed entry bundles and full tiles, then answers the waiters. */
  private async flush(): Promise<void> {
    if (!this.stillHeld()) return;
    const batch = this.pending;
    if (batch.length === 0 && this.persisted === this.tree.size) return;
    this.pending = [];
    for (const entry of batch) this.tree.appendBase64(entry);
    const size = this.tree.size;
    try {
      await persistTiles(this.options.dir, this.tree, this.persisted);
    } catch (err) {
      // Still in the tree: the next batch writes these entries again, with its own; who waited now is told.
      this.options.logger.error({ err: (err as Error).message, size }, 'transparency log: writing entries or tiles failed; retrying with the next batch');
      this.settle(size, httpError('log_unavailable', 'The transparency log could not write this receipt to disk, so no receipt is given. Retry later.'));
      return;
    }
    // Taken over while writing: what was just written is not this log's to vouch for.
    if (!this.stillHeld()) return;
    this.persisted = size;
    this.tree.dropWritten(size);
    this.settle(size);
  }

  /** Signs one checkpoint over what is on disk, records it outside the folder, writes it, then publishes it. */
  private async signCheckpoint(): Promise<void> {
    const size = this.persisted;
    if (size === this.published.size || !this.stillHeld()) return;
    try {
      const note = signNote(checkpointText(this.origin, size, rootHash(this.tree.reader, size)), this.key);
      if (this.options.statePath !== undefined) await writeLastSigned(this.options.statePath, note, this.options.stateKey);
      await writeDurably(join(this.options.dir, 'checkpoint'), note);
      this.published = { size, note };
      this.witnessPush?.push(this.published);
    } catch (err) {
      // Not published: the next batch signs again.
      this.options.logger.error({ err: (err as Error).message, size }, 'transparency log: writing the checkpoint failed; retrying with the next batch');
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
      this.lock.release();
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

/**
 * The folder must extend every checkpoint this log is known to have signed: the one in the state file outside the
 * folder, and the latest one its witnesses cosigned (`checkpoint.cosigned`, kept in the folder by the witness push).
 * Each is checked against the stored tree: as many entries at least, and the same root at its size.
 */
async function checkNotRolledBack(options: TransparencyLogOptions, identity: LogIdentity, tree: TiledTree): Promise<void> {
  const known: Array<{ note: string; where: string; signed: boolean }> = [];
  if (options.statePath !== undefined) {
    // The state file is this log's own (sealed where a seed exists): its signer may be a key a rolled-back log.json lost.
    const last = await readLastSigned(options.statePath, options.stateKey);
    if (last !== undefined) known.push({ note: last, where: `the state file ${options.statePath}`, signed: false });
    else if (tree.size > 0)
      options.logger.warn(
        { state: options.statePath, size: tree.size },
        'transparency log: no state file for a log that holds entries (a first start with one, or it was lost): this start cannot tell a rolled-back folder; only checkpoint.cosigned and the witnesses guard it',
      );
  }
  const cosigned = await readFile(join(options.dir, 'checkpoint.cosigned'), 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  if (cosigned !== undefined) known.push({ note: cosigned, where: `${options.dir}/checkpoint.cosigned`, signed: true });
  for (const { note, where, signed } of known) {
    let checkpoint;
    try {
      checkpoint = parseCheckpoint(signed ? openNote(note, identity.keys.map(parseVerifierKey)).text : parseNote(note).text);
    } catch (err) {
      throw new StoredLogError(`${where}: ${(err as Error).message}`);
    }
    // Another log's state (a folder replaced by a new log): not this log's history.
    if (checkpoint.origin !== identity.origin) continue;
    const restore = `Restore the folder from a copy holding at least ${checkpoint.size} entries, or start a new log (a new origin) in an empty folder; the refused start changed nothing`;
    if (checkpoint.size > tree.size)
      throw new LogRolledBack(
        `${where} shows this log signed a checkpoint of ${checkpoint.size} entries, and ${options.dir} holds ${tree.size}: the folder was rolled back, and extending it would sign a second history under ${identity.origin}. ${restore}`,
      );
    if (!rootHash(tree.reader, checkpoint.size).equals(checkpoint.root))
      throw new LogRolledBack(
        `the first ${checkpoint.size} entries of ${options.dir} do not hash to the root of the checkpoint in ${where}: the folder holds another history, and extending it would sign a fork. ${restore}`,
      );
  }
}
