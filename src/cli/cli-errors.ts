import { SigilError } from '../protocol/sigil-error.ts';

/** A command line the command cannot run: it prints the message and its usage, and exits 2. */
export class UsageError extends SigilError<'ERR_USAGE'> {
  constructor(message: string) {
    super('ERR_USAGE', message);
  }
}

/** An input file or trust root named on the command line that cannot be read or used. */
export class UnreadableError extends SigilError<'ERR_UNREADABLE'> {
  constructor(message: string) {
    super('ERR_UNREADABLE', message);
  }
}
