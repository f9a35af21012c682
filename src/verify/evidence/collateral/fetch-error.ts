import { SigilError } from '../../../protocol/sigil-error.ts';

/** A collateral service answered with an error or not at all; the message names the service, the URL and what came back, never a body. */
export class CollateralFetchError extends SigilError<'ERR_COLLATERAL_FETCH'> {
  constructor(message: string) {
    super('ERR_COLLATERAL_FETCH', message);
  }
}
