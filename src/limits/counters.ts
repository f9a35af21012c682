/**
 * The shared state behind rate and concurrency limits. One process keeps it in memory; a fleet keeps
 * it in Redis so that N replicas do not grant N times the quota.
 */
export interface WindowCount {
  total: number;
  /** Epoch ms when the current window ends. */
  resetAt: number;
}

export interface LimitCounters {
  /** Adds `amount` to `name` in the current fixed window of `windowMs`; returns the total after adding. */
  add(name: string, amount: number, windowMs: number): Promise<WindowCount>;
  /** The current window's total, unchanged. */
  peek(name: string, windowMs: number): Promise<WindowCount>;
  /** Takes one of `max` slots of `name`; false when all are taken. A slot held past `ttlMs` is freed (a dead holder). */
  acquire(name: string, max: number, ttlMs: number): Promise<boolean>;
  release(name: string): Promise<void>;
}

/** Fixed windows aligned on multiples of `windowMs` since the epoch, the same on every replica. */
export function windowOf(now: number, windowMs: number): { index: number; resetAt: number } {
  const index = Math.floor(now / windowMs);
  return { index, resetAt: (index + 1) * windowMs };
}

export class MemoryLimitCounters implements LimitCounters {
  readonly #windows = new Map<string, { index: number; total: number }>();
  readonly #slots = new Map<string, number>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  async add(name: string, amount: number, windowMs: number): Promise<WindowCount> {
    const { index, resetAt } = windowOf(this.#now(), windowMs);
    const entry = this.#windows.get(name);
    const total = (entry?.index === index ? entry.total : 0) + amount;
    this.#windows.set(name, { index, total });
    return { total, resetAt };
  }

  async peek(name: string, windowMs: number): Promise<WindowCount> {
    const { index, resetAt } = windowOf(this.#now(), windowMs);
    const entry = this.#windows.get(name);
    return { total: entry?.index === index ? entry.total : 0, resetAt };
  }

  async acquire(name: string, max: number): Promise<boolean> {
    const held = this.#slots.get(name) ?? 0;
    if (held >= max) return false;
    this.#slots.set(name, held + 1);
    return true;
  }

  async release(name: string): Promise<void> {
    const held = this.#slots.get(name) ?? 0;
    if (held <= 1) this.#slots.delete(name);
    else this.#slots.set(name, held - 1);
  }
}
