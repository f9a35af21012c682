import { SigilError } from '../sigil-error.ts';

/** Every error of the transparency-log verifier, by stable code (docs/log.md). */
export const TLOG_ERROR_CODES = {
  ERR_TLOG_PROOF: 'an inclusion or consistency proof does not verify',
  ERR_TLOG_NOTE: 'the signed note is malformed',
  ERR_TLOG_VKEY: 'the verifier key is malformed',
  ERR_TLOG_SIGNATURE: 'no trusted key verifies the note, or a trusted key signed it badly',
  ERR_TLOG_CHECKPOINT: 'the checkpoint text is malformed',
  ERR_TLOG_TILE: 'a tile or entry bundle is malformed or does not hash to the checkpoint',
  ERR_TLOG_WITNESS: 'fewer witnesses than required cosigned the checkpoint',
  ERR_TLOG_FETCH: 'a log resource could not be fetched',
} as const;

export type TlogErrorCode = keyof typeof TLOG_ERROR_CODES;

export class TlogError extends SigilError<TlogErrorCode> {
  constructor(code: TlogErrorCode, message: string = TLOG_ERROR_CODES[code]) {
    super(code, message);
  }
}
