import { SigilError } from './sigil-error.ts';

/** A state no input can reach, only a bug in Sigil: thrown where a plain Error would leave a reader guessing which. */
export class InvariantError extends SigilError<'ERR_INVARIANT'> {
  constructor(message: string) {
    super('ERR_INVARIANT', message);
  }
}
