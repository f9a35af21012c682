import { HttpError } from '../protocol/errors.ts';

/**
 * One replica's budget for bytes it holds whole: request bodies being read and engine answers
 * assembled and waiting for their client. Past it a request is refused (503 with Retry-After)
 * instead of the process growing until the kernel kills it.
 */
export class MemoryBudget {
  readonly total: number;
  #used = 0;

  constructor(totalBytes: number) {
    this.total = totalBytes;
  }

  get used(): number {
    return this.#used;
  }

  /** A running charge for one request's buffers; released once, when the request ends. */
  hold(): BudgetHold {
    let held = 0;
    let released = false;
    return {
      get held() {
        return held;
      },
      grow: (bytes: number) => {
        if (released || this.#used + bytes > this.total) return false;
        this.#used += bytes;
        held += bytes;
        return true;
      },
      shrink: (bytes: number) => {
        const giveBack = Math.min(bytes, held);
        held -= giveBack;
        this.#used -= giveBack;
      },
      release: () => {
        if (released) return;
        released = true;
        this.#used -= held;
        held = 0;
      },
    };
  }
}

export interface BudgetHold {
  /** What this hold has charged and not given back. */
  readonly held: number;
  /** Charges `bytes` more; false (and nothing charged) when the budget cannot take them. */
  grow(bytes: number): boolean;
  /** Gives back `bytes` of what this hold charged (a copy that is no longer needed). */
  shrink(bytes: number): void;
  /** Gives back everything; later `grow` calls fail. */
  release(): void;
}

/** The refusal a request gets when the buffers of the requests in flight already fill the budget. */
export function budgetExhausted(): HttpError {
  return new HttpError('server_busy', "This server's memory budget for requests and answers in flight is in use; retry shortly.", {
    headers: { 'retry-after': '1' },
  });
}
