/**
 * The requests a server has not finished, for a graceful shutdown (docs/operations.md#shutdown): a drain waits for
 * the count to reach zero, woken by the request that brings it there, never by polling.
 */
export class InFlightRequests {
  #count = 0;
  #waiters: Array<() => void> = [];

  get count(): number {
    return this.#count;
  }

  /** A request started. */
  enter(): void {
    this.#count++;
  }

  /** A request ended; the last one wakes whoever waits for none. */
  leave(): void {
    if (--this.#count > 0 || this.#waiters.length === 0) return;
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }

  /** Resolves true once no request is in flight, or false when `timeoutMs` passes first. */
  settled(timeoutMs: number): Promise<boolean> {
    if (this.#count === 0) return Promise.resolve(true);
    if (timeoutMs <= 0) return Promise.resolve(false);
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== wake);
        resolve(false);
      }, timeoutMs);
      this.#waiters.push(wake);
    });
  }
}
