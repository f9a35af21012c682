import { HttpError } from '../protocol/errors.ts';

/** Where a request's holds are charged: this process's own budget, or (a cluster worker) the primary's, for all workers. */
export interface Budget {
  hold(): BudgetHold;
}

/**
 * One replica's budget for bytes it holds whole: request bodies being read and engine answers
 * assembled and waiting for their client. Past it a request is refused (503 with Retry-After)
 * instead of the process growing until the kernel kills it.
 */
export class MemoryBudget implements Budget {
  /** What the holds have charged, shared with them (only they change it). */
  readonly #charged: Charged;

  constructor(totalBytes: number) {
    this.#charged = { total: totalBytes, used: 0 };
  }

  get total(): number {
    return this.#charged.total;
  }

  get used(): number {
    return this.#charged.used;
  }

  /** A running charge for one request's buffers; released once, when the request ends. */
  hold(): BudgetHold {
    return new Hold(this.#charged);
  }
}

interface Charged {
  readonly total: number;
  used: number;
}

/** One request's charge: a class, not an object literal with a getter and three closures (made for every request). */
class Hold implements BudgetHold {
  readonly #budget: Charged;
  #held = 0;
  #released = false;

  constructor(budget: Charged) {
    this.#budget = budget;
  }

  get held(): number {
    return this.#held;
  }

  grow(bytes: number): boolean {
    const budget = this.#budget;
    if (this.#released || budget.used + bytes > budget.total) return false;
    budget.used += bytes;
    this.#held += bytes;
    return true;
  }

  shrink(bytes: number): void {
    const giveBack = Math.min(bytes, this.#held);
    this.#held -= giveBack;
    this.#budget.used -= giveBack;
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#budget.used -= this.#held;
    this.#held = 0;
  }
}

export interface BudgetHold {
  /** What this hold has charged and not given back. */
  readonly held: number;
  /**
   * Charges `bytes` more; false (and nothing charged) when the budget cannot take them. A worker's hold may have to ask
   * the primary first, so the answer may come as a promise: callers await it.
   */
  grow(bytes: number): boolean | Promise<boolean>;
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
