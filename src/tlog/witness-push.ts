import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../logger/logger.ts';
import { formatAddCheckpoint, parseTlogSize, TLOG_SIZE_TYPE } from '../protocol/tlog/add-checkpoint.ts';
import { COSIGNATURE_V1, openNote, parseNote, parseVerifierKey, type NoteVerifier } from '../protocol/tlog/note.ts';
import { writeDurably } from './tile-files.ts';
import { SigilError } from '../protocol/sigil-error.ts';

/** A witness the log pushes its checkpoints to (`transparency_log.witnesses`). */
export interface WitnessTarget {
  /** The witness's submission prefix; `<url>/add-checkpoint` is posted to. */
  url: string;
  /** Its cosignature/v1 verifier key (type 4). */
  vkey: string;
}

export interface WitnessPushOptions {
  dir: string;
  witnesses: readonly WitnessTarget[];
  /** How many witnesses must cosign a checkpoint before it is kept and served as cosigned. */
  quorum: number;
  timeoutMs: number;
  logger: Logger;
  /** The log's consistency proof between two published sizes. */
  consistency: (from: number, to: number) => Buffer[] | undefined;
}

/** A signed checkpoint to push: its size and note. */
interface Checkpoint {
  size: number;
  note: string;
}

/** The cosigned checkpoint's file in the log folder: the checkpoint, the log's signature line, the witnesses' lines. */
export const COSIGNED_FILE = 'checkpoint.cosigned';

/** A configured witness key that is not a cosignature/v1 verifier key: Sigil does not start. */
export class WitnessKeyError extends SigilError<'ERR_WITNESS_KEY'> {
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_WITNESS_KEY', message, options);
  }
}

/** How many times one push follows a 409 to the witness's size before it gives up on that checkpoint. */
const CONFLICT_RETRIES = 2;

/**
 * Pushes each new checkpoint to the log's witnesses (C2SP tlog-witness add-checkpoint), one push at a time, the
 * newest checkpoint pending replacing an older one: the requests never hold up the sequencer or a receipt. Each
 * witness's answer is checked against its configured key; once `quorum` of them cosigned a checkpoint, it is written
 * to `checkpoint.cosigned` (docs/log.md#witnesses) and served.
 */
export class WitnessPush {
  private readonly options: WitnessPushOptions;
  private readonly verifiers: NoteVerifier[];
  /** The size each witness cosigned last, as far as this log knows (0 until it answers). */
  private readonly known: number[];
  private pending: Checkpoint | undefined;
  private running: Promise<void> | undefined;
  private latest: string | undefined;

  constructor(options: WitnessPushOptions) {
    this.options = options;
    this.verifiers = options.witnesses.map((w) => {
      let key: NoteVerifier;
      try {
        key = parseVerifierKey(w.vkey);
      } catch (err) {
        throw new WitnessKeyError(`the key of witness ${w.url}: ${(err as Error).message}`);
      }
      if (key.type !== COSIGNATURE_V1) throw new WitnessKeyError(`the key of witness ${w.url} is not a cosignature/v1 key (type 4)`);
      return key;
    });
    if (options.quorum > options.witnesses.length) throw new WitnessKeyError(`a quorum of ${options.quorum} needs as many witnesses`);
    this.known = options.witnesses.map(() => 0);
  }

  /** The newest cosigned checkpoint kept in the folder (from an earlier run too), or undefined. */
  get cosigned(): string | undefined {
    return this.latest;
  }

  /** Reads the cosigned checkpoint an earlier run kept. */
  async load(): Promise<void> {
    try {
      this.latest = await readFile(join(this.options.dir, COSIGNED_FILE), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }

  /** Queues `checkpoint` for the witnesses; returns at once. */
  push(checkpoint: Checkpoint): void {
    this.pending = checkpoint;
    this.running ??= this.drain();
  }

  /** Resolves once nothing is pending or being pushed. */
  async settled(): Promise<void> {
    while (this.running !== undefined) await this.running;
  }

  /** Pushes what is pending until nothing is; `running` is cleared in the same turn as the last check, so no push is left behind. */
  private async drain(): Promise<void> {
    try {
      while (this.pending !== undefined) {
        const next = this.pending;
        this.pending = undefined;
        try {
          await this.pushToAll(next);
        } catch (err) {
          this.options.logger.error({ err: (err as Error).message, size: next.size }, 'transparency log: keeping the cosigned checkpoint failed');
        }
      }
    } finally {
      this.running = undefined;
    }
  }

  private async pushToAll(checkpoint: Checkpoint): Promise<void> {
    const lines = await Promise.all(this.options.witnesses.map((_, i) => this.pushTo(i, checkpoint)));
    const cosignatures = lines.filter((l) => l !== undefined);
    if (cosignatures.length < this.options.quorum) {
      this.options.logger.warn(
        { size: checkpoint.size, cosigned: cosignatures.length, quorum: this.options.quorum },
        'transparency log: fewer witnesses than the quorum cosigned the checkpoint; the last cosigned one is still served',
      );
      return;
    }
    const cosigned = checkpoint.note + cosignatures.join('');
    await writeDurably(join(this.options.dir, COSIGNED_FILE), cosigned);
    this.latest = cosigned;
  }

  /** One witness: its cosignature line, checked, or undefined (logged why). */
  private async pushTo(i: number, checkpoint: Checkpoint): Promise<string | undefined> {
    const { url } = this.options.witnesses[i]!;
    const fail = (why: string, status?: number) => {
      this.options.logger.warn({ witness: url, size: checkpoint.size, ...(status === undefined ? {} : { status }) }, `transparency log: witness ${why}`);
      return undefined;
    };
    for (let attempt = 0; attempt <= CONFLICT_RETRIES; attempt++) {
      const old = this.known[i]! <= checkpoint.size ? this.known[i]! : 0;
      const proof = old === 0 ? [] : this.options.consistency(old, checkpoint.size);
      if (proof === undefined) return fail(`cosigned ${old} entries, more than this checkpoint's ${checkpoint.size}`);
      let res: Response;
      try {
        res = await fetch(`${url.replace(/\/+$/, '')}/add-checkpoint`, {
          method: 'POST',
          body: formatAddCheckpoint({ oldSize: old, proof, note: checkpoint.note }),
          signal: AbortSignal.timeout(this.options.timeoutMs),
        });
      } catch (err) {
        return fail(`did not answer (${(err as Error).name === 'TimeoutError' ? `timed out after ${this.options.timeoutMs} ms` : (err as Error).message})`);
      }
      const text = await res.text().catch(() => '');
      if (res.status === 200) return this.cosignatureIn(i, checkpoint, text) ?? fail('answered 200 without a valid cosignature of its configured key');
      if (res.status === 409) {
        const size = res.headers.get('content-type')?.startsWith(TLOG_SIZE_TYPE) === true ? parseTlogSize(text) : undefined;
        if (size === undefined) return fail('answered 409 without its size');
        if (size === old) return fail(`refused: it cosigned another checkpoint of ${size} entries for this origin (a fork, or a rolled-back log folder)`, 409);
        if (size > checkpoint.size) return fail(`cosigned ${size} entries, more than this checkpoint's ${checkpoint.size} (a rolled-back log folder?)`, 409);
        this.known[i] = size;
        continue;
      }
      if (res.status === 403) return fail('does not trust the key that signed this checkpoint (403): give it the log key', 403);
      if (res.status === 404) return fail('does not follow this log origin (404): give it the log key', 404);
      return fail(`answered ${res.status}: ${text.slice(0, 200)}`, res.status);
    }
    return fail('kept answering 409 with other sizes', 409);
  }

  /** The line of witness `i` in a 200 answer, verified over the checkpoint; the witness's size is then the checkpoint's. */
  private cosignatureIn(i: number, checkpoint: Checkpoint, answer: string): string | undefined {
    const key = this.verifiers[i]!;
    const text = parseNote(checkpoint.note).text;
    try {
      openNote(`${text}\n${answer}`, [key]);
    } catch {
      return undefined;
    }
    const line = answer.split('\n').find((l) => {
      const sig = l.startsWith(`\u2014 ${key.name} `) ? Buffer.from(l.slice(key.name.length + 3), 'base64') : undefined;
      return sig !== undefined && sig.length >= 4 && sig.readUInt32BE(0) === key.keyId;
    });
    if (line === undefined) return undefined;
    this.known[i] = checkpoint.size;
    return `${line}\n`;
  }
}
