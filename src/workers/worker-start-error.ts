import { SigilError } from '../protocol/sigil-error.ts';

/** A worker that exited before it listened: `sigil serve` with workers does not start (docs/errors.md). */
export class WorkerStartError extends SigilError<'ERR_WORKER_START'> {
  constructor(message: string) {
    super('ERR_WORKER_START', message);
  }
}
