import { SigilError } from '../../protocol/sigil-error.ts';

/** Why a release manifest, its bundle, a signing key or a trust root could not be used. Each code is stable. */
export type ReleaseErrorCode = 'ERR_RELEASE_MANIFEST' | 'ERR_RELEASE_BUNDLE' | 'ERR_RELEASE_SIGNING_KEY' | 'ERR_RELEASE_TRUST_ROOT';

export class ReleaseError extends SigilError<ReleaseErrorCode> {
  constructor(code: ReleaseErrorCode, message: string) {
    super(code, message);
  }
}
