import { TlogError } from './errors.ts';
import { decodeBase64, openNote, ED25519, COSIGNATURE_V1, type NoteVerifier } from './note.ts';

/** C2SP tlog-checkpoint: the origin, the tree size and the base64 root hash, then optional extension lines. */
export interface Checkpoint {
  origin: string;
  size: number;
  root: Buffer;
  extensions: string[];
  /** The note text exactly as signed. */
  text: string;
}

/** Parses checkpoint text (the note text, final newline included). */
export function parseCheckpoint(text: string): Checkpoint {
  if (!text.endsWith('\n')) throw new TlogError('ERR_TLOG_CHECKPOINT', 'the checkpoint text does not end with a newline');
  const lines = text.slice(0, -1).split('\n');
  const [origin, size, root, ...extensions] = lines;
  if (origin === undefined || size === undefined || root === undefined)
    throw new TlogError('ERR_TLOG_CHECKPOINT', 'a checkpoint has an origin, a size and a root hash line');
  if (origin === '') throw new TlogError('ERR_TLOG_CHECKPOINT', 'the origin line is empty');
  if (!/^(?:0|[1-9]\d*)$/.test(size) || !Number.isSafeInteger(Number(size)))
    throw new TlogError('ERR_TLOG_CHECKPOINT', `the tree size "${size}" is not a decimal without leading zeros`);
  const hash = decodeBase64(root, 'the root hash', 'ERR_TLOG_CHECKPOINT');
  if (hash.length !== 32) throw new TlogError('ERR_TLOG_CHECKPOINT', 'the root hash is not 32 bytes');
  if (extensions.some((l) => l === '')) throw new TlogError('ERR_TLOG_CHECKPOINT', 'an extension line is empty');
  return { origin, size: Number(size), root: hash, extensions, text };
}

/** The text of a checkpoint. */
export function checkpointText(origin: string, size: number, root: Uint8Array): string {
  return `${origin}\n${size}\n${Buffer.from(root).toString('base64')}\n`;
}

export interface WitnessPolicy {
  /** Cosignature/v1 keys of the witnesses the verifier trusts. */
  witnesses: NoteVerifier[];
  /** How many of them must have cosigned; 0 waives witnessing. */
  required: number;
}

export interface VerifiedCheckpoint extends Checkpoint {
  /** Names of the trusted witnesses whose cosignatures verified, with their timestamps. */
  cosigners: Array<{ name: string; timestamp: number }>;
}

/**
 * Opens a signed checkpoint: the log key must have signed it (ERR_TLOG_SIGNATURE), its origin must be the
 * log's (ERR_TLOG_CHECKPOINT), and at least `required` trusted witnesses must have cosigned it (ERR_TLOG_WITNESS).
 */
export function openCheckpoint(note: string, log: NoteVerifier, origin: string, policy: WitnessPolicy = { witnesses: [], required: 0 }): VerifiedCheckpoint {
  const verified = openNote(note, [log, ...policy.witnesses]);
  if (!verified.signers.some((s) => s.name === log.name && s.type === ED25519))
    throw new TlogError('ERR_TLOG_SIGNATURE', `the log key ${log.name} did not sign the checkpoint`);
  const checkpoint = parseCheckpoint(verified.text);
  if (checkpoint.origin !== origin) throw new TlogError('ERR_TLOG_CHECKPOINT', `the checkpoint is of origin "${checkpoint.origin}", not the log's "${origin}"`);
  const cosigners = verified.signers.filter((s) => s.type === COSIGNATURE_V1).map((s) => ({ name: s.name, timestamp: s.timestamp ?? 0 }));
  if (cosigners.length < policy.required) {
    throw new TlogError(
      'ERR_TLOG_WITNESS',
      `${cosigners.length} of the required ${policy.required} witnesses cosigned the checkpoint${cosigners.length > 0 ? ` (${cosigners.map((c) => c.name).join(', ')})` : ''}`,
    );
  }
  return { ...checkpoint, cosigners };
}
