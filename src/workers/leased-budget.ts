import type { Budget, BudgetHold } from '../limits/memory-budget.ts';
import type { PrimaryChannel } from './shared-state.ts';

/** Leased from the primary ahead of need, so that most requests are charged without a round trip. */
const LEASE_BYTES = 1024 * 1024;

/**
 * A worker's share of the one memory budget (docs/configuration.md, `limits.buffer_budget_bytes`), which the primary
 * counts for all workers together, as it counts `max_concurrent`. The worker leases bytes from the primary and charges
 * its requests' holds against them: a charge the lease covers is decided here at once; a larger one asks the primary
 * for what is missing (and a lease ahead), and is refused when the primary's budget cannot give it. Bytes given back
 * stay leased up to two leases ahead, the rest return to the primary. So the bytes all workers hold never pass the
 * budget; at most two leases a worker sit unused.
 */
export class LeasedBudget implements Budget {
  readonly #channel: PrimaryChannel;
  readonly #leaseBytes: number;
  /** Leased from the primary and charged to no hold. */
  #spare = 0;

  constructor(channel: PrimaryChannel, totalBytes: number) {
    this.#channel = channel;
    this.#leaseBytes = Math.min(LEASE_BYTES, Math.floor(totalBytes / 64));
  }

  hold(): BudgetHold {
    return new LeasedHold(this);
  }

  /** Takes `bytes` of the lease, asking the primary for more when it is short. */
  take(bytes: number): boolean | Promise<boolean> {
    if (bytes <= this.#spare) {
      this.#spare -= bytes;
      return true;
    }
    const least = bytes - this.#spare;
    return this.#channel.call<number>({ op: 'budget.lease', bytes: least + this.#leaseBytes, least }).then(
      (granted) => {
        this.#spare += granted;
        if (bytes > this.#spare) {
          this.give(0);
          return false;
        }
        this.#spare -= bytes;
        return true;
      },
      () => false,
    );
  }

  /** Gives `bytes` back to the lease; past two leases ahead, the rest goes back to the primary. */
  give(bytes: number): void {
    this.#spare += bytes;
    if (this.#spare <= 2 * this.#leaseBytes) return;
    const back = this.#spare - this.#leaseBytes;
    this.#spare -= back;
    this.#channel.notify({ op: 'budget.return', bytes: back });
  }
}

class LeasedHold implements BudgetHold {
  readonly #budget: LeasedBudget;
  #held = 0;
  #released = false;

  constructor(budget: LeasedBudget) {
    this.#budget = budget;
  }

  get held(): number {
    return this.#held;
  }

  grow(bytes: number): boolean | Promise<boolean> {
    if (this.#released) return false;
    const taken = this.#budget.take(bytes);
    if (typeof taken === 'boolean') return this.#charged(taken, bytes);
    return taken.then((ok) => this.#charged(ok, bytes));
  }

  #charged(ok: boolean, bytes: number): boolean {
    if (!ok) return false;
    // Released while the primary was asked: the bytes go straight back.
    if (this.#released) {
      this.#budget.give(bytes);
      return false;
    }
    this.#held += bytes;
    return true;
  }

  shrink(bytes: number): void {
    const giveBack = Math.min(bytes, this.#held);
    this.#held -= giveBack;
    this.#budget.give(giveBack);
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#budget.give(this.#held);
    this.#held = 0;
  }
}
