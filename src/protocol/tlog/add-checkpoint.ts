import { TlogError } from './errors.ts';
import { decodeBase64 } from './note.ts';

/**
 * C2SP tlog-witness `add-checkpoint`: the request body (an `old <size>` line, up to 63 consistency proof lines in
 * base64, an empty line, then the signed checkpoint) and the 409 answer's body (`<size>\n`, text/x.tlog.size).
 */

export const MAX_PROOF_LINES = 63;
export const TLOG_SIZE_TYPE = 'text/x.tlog.size';

export interface AddCheckpointRequest {
  oldSize: number;
  proof: Buffer[];
  /** The signed checkpoint note, as sent. */
  note: string;
}

export function formatAddCheckpoint({ oldSize, proof, note }: AddCheckpointRequest): string {
  return `old ${oldSize}\n${proof.map((h) => `${h.toString('base64')}\n`).join('')}\n${note}`;
}

const DECIMAL = /^(?:0|[1-9]\d{0,15})$/;

/** Reads an add-checkpoint body; a malformed one throws ERR_TLOG_NOTE (the witness answers 400). */
export function parseAddCheckpoint(body: string): AddCheckpointRequest {
  const blank = body.indexOf('\n\n');
  if (blank < 0) throw new TlogError('ERR_TLOG_NOTE', 'the body has no empty line before the checkpoint');
  const [first, ...proofLines] = body.slice(0, blank).split('\n');
  if (first === undefined || !first.startsWith('old ') || !DECIMAL.test(first.slice(4)))
    throw new TlogError('ERR_TLOG_NOTE', 'the first line is not "old <size>" in decimal without leading zeros');
  if (proofLines.length > MAX_PROOF_LINES) throw new TlogError('ERR_TLOG_NOTE', `more than ${MAX_PROOF_LINES} consistency proof lines`);
  const proof = proofLines.map((line) => decodeBase64(line, 'a consistency proof line', 'ERR_TLOG_NOTE'));
  if (proof.some((h) => h.length !== 32)) throw new TlogError('ERR_TLOG_NOTE', 'a consistency proof line is not a 32-byte hash');
  return { oldSize: Number(first.slice(4)), proof, note: body.slice(blank + 2) };
}

/** The size a 409 answer names, or undefined when its body is not `<size>\n`. */
export function parseTlogSize(body: string): number | undefined {
  return /^(?:0|[1-9]\d{0,15})\n$/.test(body) ? Number(body.slice(0, -1)) : undefined;
}
