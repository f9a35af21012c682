import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { writeDurably } from './tile-files.ts';
import { SigilError } from '../protocol/sigil-error.ts';

/**
 * The last checkpoint this log signed, kept outside the log folder (`transparency_log.state`, docs/log.md#rollback): a
 * folder restored from an older copy does not take it back, so the log learns on start how far it had signed and
 * never signs a shorter or different history under the same origin. With a sealed seed the file carries an
 * HMAC-SHA-256 under a key derived from it: a state file the operator edited or made is refused.
 */
export class LogStateError extends SigilError<'ERR_LOG_STATE'> {
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_LOG_STATE', message, options);
  }
}

interface StateFile {
  checkpoint: string;
  hmac?: string;
}

const mac = (key: Buffer, note: string) => createHmac('sha256', key).update(note).digest('base64');

/** The signed note last written to `path`, or undefined when there is no state file yet. */
export async function readLastSigned(path: string, macKey: Buffer | undefined): Promise<string | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new LogStateError(`cannot read the log's state file ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  let state: Partial<StateFile>;
  try {
    state = JSON.parse(text) as Partial<StateFile>;
  } catch {
    throw new LogStateError(`the log's state file ${path} is not JSON`);
  }
  if (typeof state.checkpoint !== 'string') throw new LogStateError(`the log's state file ${path} holds no checkpoint`);
  if (macKey !== undefined) {
    const expected = Buffer.from(mac(macKey, state.checkpoint));
    const given = Buffer.from(typeof state.hmac === 'string' ? state.hmac : '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected))
      throw new LogStateError(
        `the log's state file ${path} was not written by this enclave (its seal does not verify): it was edited, or made by other code. ` +
          'A code upgrade is a new log identity (docs/log.md#identity): give transparency_log.dir and transparency_log.state new places (and transparency_log.origin a new name), and keep this folder for auditors',
      );
  }
  return state.checkpoint;
}

/** Records `note` as the last signed checkpoint, durably, before the checkpoint is published. */
export async function writeLastSigned(path: string, note: string, macKey: Buffer | undefined): Promise<void> {
  const state: StateFile = { checkpoint: note, ...(macKey === undefined ? {} : { hmac: mac(macKey, note) }) };
  await writeDurably(path, JSON.stringify(state) + '\n');
}
