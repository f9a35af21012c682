/**
 * Limits and receipts held once, in the primary, for every worker: a worker's LimitCounters and
 * ReceiptStore are calls over IPC, answered by the primary's own (in memory, or the fleet's Redis).
 * So a per-key quota is exact across workers, a receipt made by one worker is fetched through any, and
 * an EHBP request replayed to another worker is still refused.
 */
import type { Worker } from 'node:cluster';
import type { LimitCounters, WindowCount } from '../limits/counters.ts';
import type { ReceiptOwner, ReceiptStore } from '../receipts/store.ts';
import type { ReplayVerdict, ReplayWindow } from '../limits/replay-window.ts';
import { isWorkerMessage, type PrimaryCall, type ToPrimary } from './messages.ts';

/** The worker's end: numbered calls to the primary, each resolved by its answer. */
export class PrimaryChannel {
  #next = 0;
  readonly #pending = new Map<number, { resolve(value: unknown): void; reject(err: Error): void }>();

  constructor() {
    process.on('message', (m: unknown) => {
      if (!isWorkerMessage(m) || m.type !== 'sigil:answer') return;
      const waiting = this.#pending.get(m.id);
      if (waiting === undefined) return;
      this.#pending.delete(m.id);
      if (m.error !== undefined) waiting.reject(new Error(m.error));
      else waiting.resolve(m.value);
    });
  }

  call<T>(call: PrimaryCall): Promise<T> {
    const id = this.#next++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      const message: ToPrimary = { type: 'sigil:call', id, call };
      process.send!(message, undefined, {}, (err) => {
        if (err === null) return;
        this.#pending.delete(id);
        reject(err);
      });
    });
  }
}

export class PrimaryLimitCounters implements LimitCounters {
  readonly #channel: PrimaryChannel;

  constructor(channel: PrimaryChannel) {
    this.#channel = channel;
  }

  add(name: string, amount: number, windowMs: number): Promise<WindowCount> {
    return this.#channel.call({ op: 'limits.add', name, amount, windowMs });
  }

  peek(name: string, windowMs: number): Promise<WindowCount> {
    return this.#channel.call({ op: 'limits.peek', name, windowMs });
  }

  acquire(name: string, max: number, ttlMs: number): Promise<boolean> {
    return this.#channel.call({ op: 'limits.acquire', name, max, ttlMs });
  }

  release(name: string): Promise<void> {
    return this.#channel.call({ op: 'limits.release', name });
  }
}

export class PrimaryReceiptStore implements ReceiptStore {
  readonly #channel: PrimaryChannel;

  constructor(channel: PrimaryChannel) {
    this.#channel = channel;
  }

  put(receiptId: string, owner: ReceiptOwner, jws: string): Promise<void> {
    return this.#channel.call({ op: 'receipts.put', receiptId, owner: ownerTo(owner), jws });
  }

  get(receiptId: string, owner: ReceiptOwner): Promise<string | undefined> {
    return this.#channel.call({ op: 'receipts.get', receiptId, owner: ownerTo(owner) });
  }
}

/** The owner as plain data for IPC: a caller derives its secret on first read (src/auth/bearer.ts), which a clone would not do. */
function ownerTo(owner: ReceiptOwner): ReceiptOwner {
  return { keyHash: owner.keyHash, secret: owner.secret };
}

/** IPC's structured clone turns a Buffer into a Uint8Array: the owner's secret is made a Buffer again. */
function ownerFrom(owner: ReceiptOwner): ReceiptOwner {
  return { keyHash: owner.keyHash, secret: Buffer.from(owner.secret.buffer, owner.secret.byteOffset, owner.secret.byteLength) };
}

/** EHBP's replay window, one for all workers: a sealed request replayed to another worker is still refused. */
export class PrimaryReplayWindow implements ReplayWindow {
  readonly #channel: PrimaryChannel;

  constructor(channel: PrimaryChannel) {
    this.#channel = channel;
  }

  claim(id: string): Promise<ReplayVerdict> {
    return this.#channel.call({ op: 'replays.claim', id });
  }
}

/**
 * The primary's end for one worker. Concurrency slots the worker holds are remembered, so a worker
 * that dies does not keep them: `releaseAll` frees them when it exits.
 */
export function answerWorker(
  worker: Worker,
  shared: { counters: LimitCounters; receipts: ReceiptStore; replays: ReplayWindow | undefined },
): { releaseAll(): Promise<void> } {
  const { counters, receipts, replays } = shared;
  const held = new Map<string, number>();
  const run = async (call: PrimaryCall): Promise<unknown> => {
    switch (call.op) {
      case 'limits.add':
        return counters.add(call.name, call.amount, call.windowMs);
      case 'limits.peek':
        return counters.peek(call.name, call.windowMs);
      case 'limits.acquire': {
        const granted = await counters.acquire(call.name, call.max, call.ttlMs);
        if (granted) held.set(call.name, (held.get(call.name) ?? 0) + 1);
        return granted;
      }
      case 'limits.release': {
        const count = held.get(call.name) ?? 0;
        if (count === 0) return undefined;
        if (count === 1) held.delete(call.name);
        else held.set(call.name, count - 1);
        return counters.release(call.name);
      }
      case 'receipts.put':
        return receipts.put(call.receiptId, ownerFrom(call.owner), call.jws);
      case 'receipts.get':
        return receipts.get(call.receiptId, ownerFrom(call.owner));
      case 'replays.claim':
        if (replays === undefined) throw new Error('EHBP is off');
        return replays.claim(call.id);
    }
  };
  worker.on('message', (m: ToPrimary) => {
    if (m?.type !== 'sigil:call') return;
    run(m.call).then(
      (value) => worker.isConnected() && worker.send({ type: 'sigil:answer', id: m.id, value }),
      (err: Error) => worker.isConnected() && worker.send({ type: 'sigil:answer', id: m.id, error: err.message }),
    );
  });
  return {
    releaseAll: async () => {
      for (const [name, count] of held) for (let i = 0; i < count; i++) await counters.release(name);
      held.clear();
    },
  };
}
