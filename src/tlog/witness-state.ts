import { open, readFile, rename } from 'node:fs/promises';
import { dirname } from 'node:path';
import { SigilError } from '../protocol/sigil-error.ts';

/** A witness's state file that does not hold a size and a root for each origin: the witness does not start. */
export class WitnessStateError extends SigilError<'ERR_WITNESS_STATE'> {
  constructor(message: string) {
    super('ERR_WITNESS_STATE', message);
  }
}

/** What a witness cosigned last for one log origin. */
export interface CosignedTree {
  size: number;
  /** The root hash, base64. */
  root: string;
}

/**
 * A witness's state file (`--state`): the latest checkpoint it cosigned per origin, as JSON. Each change is written
 * to a temporary file, synced, renamed over the state and the folder synced, before any cosignature leaves: after a
 * crash the file holds the last state a cosignature was given for, so the witness never cosigns a checkpoint that
 * does not extend one it already cosigned.
 */
export class WitnessState {
  private constructor(
    private readonly file: string,
    private readonly trees: Record<string, CosignedTree>,
  ) {}

  static async open(file: string): Promise<WitnessState> {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new WitnessState(file, {});
      throw err;
    }
    let trees: Record<string, CosignedTree>;
    try {
      trees = JSON.parse(text) as Record<string, CosignedTree>;
    } catch (err) {
      throw new WitnessStateError(`${file}: not JSON (${(err as Error).message})`);
    }
    for (const [origin, tree] of Object.entries(trees))
      if (!Number.isSafeInteger(tree.size) || typeof tree.root !== 'string') throw new WitnessStateError(`${file}: the state of ${origin} is not {size, root}`);
    return new WitnessState(file, trees);
  }

  get(origin: string): CosignedTree | undefined {
    return this.trees[origin];
  }

  /** Records `tree` for `origin`, durably, before returning. */
  async set(origin: string, tree: CosignedTree): Promise<void> {
    const next = { ...this.trees, [origin]: tree };
    const temporary = `${this.file}.tmp`;
    const handle = await open(temporary, 'w', 0o600);
    try {
      await handle.writeFile(JSON.stringify(next, null, 2) + '\n');
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, this.file);
    const folder = await open(dirname(this.file), 'r');
    try {
      await folder.sync();
    } finally {
      await folder.close();
    }
    this.trees[origin] = tree;
  }
}
