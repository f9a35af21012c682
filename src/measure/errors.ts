import { SigilError } from '../protocol/sigil-error.ts';

/** Every error `sigil measure` reports, by stable code. Callers branch on `code`, never on the message. */
export const MEASURE_ERROR_CODES = {
  ERR_MEASURE_FIRMWARE: 'the firmware image lacks a table or section the measurement needs',
  ERR_MEASURE_INPUT: 'an input value is missing, malformed or contradicts another',
  ERR_MEASURE_UNSUPPORTED: 'the firmware or VM shape asks for something this tool does not model',
} as const;

export type MeasureErrorCode = keyof typeof MEASURE_ERROR_CODES;

export class MeasureError extends SigilError<MeasureErrorCode> {
  constructor(code: MeasureErrorCode, message: string = MEASURE_ERROR_CODES[code]) {
    super(code, message);
  }
}
