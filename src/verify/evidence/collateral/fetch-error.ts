import { SigilError } from '../../../protocol/sigil-error.ts';

/** A collateral service answered with an error or not at all; the message names the service, the URL and what came back, never a body. */
export class CollateralFetchError extends SigilError<'ERR_COLLATERAL_FETCH'> {
  constructor(message: string) {
    super('ERR_COLLATERAL_FETCH', message);
  }
}

/**
 * A service answered, but not with what was asked: a file larger than the cap, a redirect to another host, or bytes
 * that are not the kind of file the URL serves (a mirror's error page, another file). Nothing of it is kept.
 */
export class CollateralAnswerError extends SigilError<'ERR_COLLATERAL_ANSWER'> {
  constructor(message: string) {
    super('ERR_COLLATERAL_ANSWER', message);
  }
}
