import { SigilError } from '../protocol/sigil-error.ts';

/** Sigil's measured artifact cannot be listed or used as it was measured: Sigil does not start (docs/errors.md). */
export class ArtifactError extends SigilError<'ERR_ARTIFACT'> {
  constructor(message: string) {
    super('ERR_ARTIFACT', message);
  }
}
