import { SigilError } from '../../protocol/sigil-error.ts';

/** Why a release manifest, its bundle, a signing key or a trust root could not be used. Each code is stable. */
export type ReleaseErrorCode =
  | 'ERR_RELEASE_MANIFEST'
  | 'ERR_RELEASE_BUNDLE'
  | 'ERR_RELEASE_SIGNING_KEY'
  | 'ERR_RELEASE_TRUST_ROOT'
  /** The signer's key or trust root could not be used to verify a manifest at all: no verdict, an error. */
  | 'ERR_RELEASE_TRUST_UNUSABLE';

export class ReleaseError extends SigilError<ReleaseErrorCode> {
  constructor(code: ReleaseErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, options);
  }
}
