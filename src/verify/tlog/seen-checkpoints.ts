import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { TlogError } from '../../protocol/tlog/errors.ts';
import { verifyLogConsistency, type TrustedLog } from './log-client.ts';
import type { VerifiedCheckpoint } from '../../protocol/tlog/checkpoint.ts';

/**
 * A verifier's small local state (docs/log.md#verifying): the largest checkpoint seen of each log origin. Each new
 * checkpoint must extend it (a consistency proof from the log), so a log that forks, truncates or shows this verifier
 * another history than before is caught the next time it looks.
 */
export interface SeenCheckpoint {
  size: number;
  root: string;
  note: string;
}

type SeenState = Record<string, SeenCheckpoint>;

function readState(file: string): SeenState {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw err;
  }
  const parsed = JSON.parse(text) as unknown;
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new TlogError('ERR_TLOG_CHECKPOINT', `${file} is not a state of seen checkpoints`);
  return parsed as SeenState;
}

/**
 * Checks `checkpoint` against the one this state last kept for its origin, then keeps the larger. Returns the
 * previous one (undefined the first time this origin is seen).
 */
export async function checkAgainstSeen(file: string, log: TrustedLog, checkpoint: VerifiedCheckpoint): Promise<SeenCheckpoint | undefined> {
  const state = readState(file);
  const previous = state[checkpoint.origin];
  if (previous !== undefined) await verifyLogConsistency(log, { size: previous.size, root: Buffer.from(previous.root, 'base64') }, checkpoint);
  if (previous === undefined || checkpoint.size > previous.size) {
    state[checkpoint.origin] = { size: checkpoint.size, root: checkpoint.root.toString('base64'), note: checkpoint.text };
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(`${file}.tmp`, JSON.stringify(state, null, 2) + '\n');
    renameSync(`${file}.tmp`, file);
  }
  return previous;
}
