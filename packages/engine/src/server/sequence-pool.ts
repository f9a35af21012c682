import { queueFull } from './errors.ts';

interface Waiter<T> {
  resolve(item: T): void;
  reject(reason: unknown): void;
}

/** Hands out a fixed set of items (context sequences); up to `maxWaiting` callers wait in order, more get a 429. */
export class SequencePool<T> {
  private readonly free: T[];
  private readonly waiting: Waiter<T>[] = [];

  constructor(
    items: readonly T[],
    private readonly maxWaiting: number,
  ) {
    this.free = [...items];
  }

  get waitingCount(): number {
    return this.waiting.length;
  }

  /** Resolves with a free item; rejects with a queue-full error, or with the signal's reason if it aborts first. */
  acquire(signal: AbortSignal): Promise<T> {
    const item = this.free.pop();
    if (item !== undefined) return Promise.resolve(item);
    if (this.waiting.length >= this.maxWaiting) return Promise.reject(queueFull());
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        this.waiting.splice(this.waiting.indexOf(waiter), 1);
        reject(signal.reason);
      };
      const waiter: Waiter<T> = {
        resolve: (value) => {
          signal.removeEventListener('abort', onAbort);
          resolve(value);
        },
        reject,
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  release(item: T): void {
    const next = this.waiting.shift();
    if (next) next.resolve(item);
    else this.free.push(item);
  }
}
