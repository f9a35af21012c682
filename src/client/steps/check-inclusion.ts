import { fetch as undiciFetch } from 'undici';
import { InclusionWatch, type InclusionVerdict } from '../../verify/tlog/receipt-inclusion.ts';
import { attestedLog, responseVerdict, type LoggedReceipt } from '../log-inclusion.ts';
import type { ReceiptResult } from '../receipts.ts';
import type { AttestedSession } from '../session.ts';

export interface InclusionOptions {
  /** Check that the log the attestation binds holds every verified receipt; default true. */
  checkLogInclusion?: boolean | undefined;
  onInclusion?: ((verdict: InclusionVerdict, result: ReceiptResult) => void) | undefined;
  logStateFile?: string | undefined;
}

/**
 * The last step, after the answer was handed over: the service's transparency log must hold the response's receipts
 * (docs/log.md, "Verifying"). The log is read over the session's own connections (pinned when TLS ends in the enclave);
 * a checkpoint the log asks to refresh re-attests first. A failed verdict is told, never silent.
 */
export class InclusionCheck {
  readonly #watch: InclusionWatch;

  constructor(
    private readonly session: AttestedSession,
    base: URL,
    private readonly options: InclusionOptions,
  ) {
    const fetchLog = ((input: string) => undiciFetch(input, { dispatcher: session.agent })) as unknown as typeof fetch;
    this.#watch = new InclusionWatch({
      log: async (fresh) => attestedLog(fresh ? await session.reattest() : session.attested, base, fetchLog),
      ...(options.logStateFile === undefined ? {} : { stateFile: options.logStateFile }),
    });
  }

  /** Whether a verified receipt is looked for: the caller did not turn it off and the verdict binds a log. */
  get applies(): boolean {
    return this.options.checkLogInclusion !== false && this.session.attested.transparencyLog !== null;
  }

  /** One verdict for all the receipts of a response, given to `onInclusion` or emitted as a `SIGIL_LOG_INCLUSION` warning when failed. */
  async ofResponse(logged: LoggedReceipt[], result: ReceiptResult): Promise<InclusionVerdict> {
    const verdict = responseVerdict(await Promise.all(logged.map((r) => this.#watch.check(r.jws, r.index))));
    if (this.options.onInclusion !== undefined) this.options.onInclusion(verdict, result);
    else if (!verdict.ok) process.emitWarning(`receipt ${String(verdict.receiptId)}: ${verdict.detail}`, { code: 'SIGIL_LOG_INCLUSION' });
    return verdict;
  }

  /** One receipt (a compact JWS), at `index` if known; never rejects. */
  check(receipt: string, index?: number): Promise<InclusionVerdict> {
    return this.#watch.check(receipt, index);
  }

  close(): void {
    this.#watch.close();
  }
}
