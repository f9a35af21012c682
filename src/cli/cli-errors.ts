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

/** An encapsulated request larger than `sigil ohttp-relay --max-body-bytes`: answered 413, never forwarded whole. */
export class RelayBodyTooLargeError extends SigilError<'ERR_RELAY_BODY_TOO_LARGE'> {
  constructor(maxBodyBytes: number) {
    super('ERR_RELAY_BODY_TOO_LARGE', `the encapsulated request is larger than ${maxBodyBytes} bytes`);
  }
}
