/**
 * Limits and receipts held once, in the primary, for every worker: a worker's chat admission and
 * ReceiptStore are calls over IPC, answered by the primary's own (in memory, or the fleet's Redis).
 * So a quota is exact across workers, a receipt made by one worker is fetched through any, and an EHBP
 * request replayed to another worker is still refused.
 *
 * Cost: a chat request makes one round trip (admit) and one message nobody waits for (finish); calls made
 * in one turn of a worker's event loop leave as one IPC message, and the primary's answers to them too.
 */
import type { Worker } from 'node:cluster';
import { hash } from 'node:crypto';
import { logDocument } from '../http/routes/transparency-log.ts';
import { HttpError, httpError } from '../protocol/errors.ts';
import type { LogDocument, ServedLog } from '../tlog/served-log.ts';
import type { TransparencyLog } from '../tlog/transparency-log.ts';
import type { ChatAdmission, CountedAdmission, Verdict } from '../limits/admission.ts';
import type { MemoryBudget } from '../limits/memory-budget.ts';
import type { ReceiptOwner, ReceiptStore } from '../receipts/store.ts';
import type { ReplayVerdict, ReplayWindow } from '../limits/replay-window.ts';
import {
  isWorkerMessage,
  type Answer,
  type CallBatch,
  type LogAppendReply,
  type LogReply,
  type PrimaryCall,
  type PrimaryNotice,
  type ToPrimary,
  type ToWorker,
} from './messages.ts';
import { InvariantError } from '../protocol/invariant-error.ts';

/** Collects what is sent in one turn of the event loop and sends it as one message when the turn ends. */
class Outbox<T> {
  #items: T[] = [];
  readonly #send: (items: T[]) => void;

  constructor(send: (items: T[]) => void) {
    this.#send = send;
  }

  push(item: T): void {
    if (this.#items.push(item) === 1) setImmediate(this.#flush);
  }

  readonly #flush = () => {
    const items = this.#items;
    this.#items = [];
    this.#send(items);
  };
}

/** The worker's end: numbered calls to the primary, each resolved by its answer, and notices. */
export class PrimaryChannel {
  #next = 0;
  readonly #pending = new Map<number, { resolve(value: unknown): void; reject(err: Error): void }>();
  readonly #outbox = new Outbox<CallBatch[number]>((calls) => {
    const message: ToPrimary = { type: 'sigil:calls', calls };
    process.send!(message, undefined, {}, (err) => {
      if (err === null) return;
      for (const item of calls) {
        if (!('id' in item)) continue;
        this.#pending.get(item.id)?.reject(err);
        this.#pending.delete(item.id);
      }
    });
  });

  constructor() {
    process.on('message', (m: unknown) => {
      if (!isWorkerMessage(m) || m.type !== 'sigil:answers') return;
      for (const answer of m.answers) {
        const waiting = this.#pending.get(answer.id);
        if (waiting === undefined) continue;
        this.#pending.delete(answer.id);
        if (answer.error !== undefined) waiting.reject(new Error(answer.error));
        else waiting.resolve(answer.value);
      }
    });
  }

  call<T>(call: PrimaryCall): Promise<T> {
    const id = this.#next++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.#outbox.push({ id, call });
    });
  }

  notify(notice: PrimaryNotice): void {
    this.#outbox.push({ notice });
  }
}

/** A worker's chat admission: decided by the primary, for all workers at once. */
export class PrimaryAdmission implements ChatAdmission {
  readonly #channel: PrimaryChannel;

  constructor(channel: PrimaryChannel) {
    this.#channel = channel;
  }

  admit(keyHash: string): Promise<Verdict> {
    return this.#channel.call({ op: 'limits.admit', keyHash });
  }

  finish(keyHash: string, tokensUsed: number): void {
    this.#channel.notify({ op: 'limits.finish', keyHash, tokensUsed });
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
 * A worker's transparency log: the primary's sequencer. The worker hashes the receipt and sends the 32-byte entry; the
 * primary hands back its leaf index. A message receipt's append leaves with the store's put, in one message.
 */
export class PrimaryLog implements ServedLog {
  readonly #channel: PrimaryChannel;

  constructor(channel: PrimaryChannel) {
    this.#channel = channel;
  }

  async append(jws: string, receiptId: string): Promise<number> {
    const reply = await this.#channel.call<LogAppendReply>({ op: 'log.append', entry: hash('sha256', jws, 'base64'), receiptId });
    if (typeof reply !== 'number') throw httpError(reply.error.code, reply.error.message, reply.error.param);
    return reply;
  }

  async read(resource: string, query: string): Promise<LogDocument> {
    const reply = await this.#channel.call<LogReply>({ op: 'log.read', resource, query });
    if ('error' in reply) throw httpError(reply.error.code, reply.error.message, reply.error.param);
    return reply;
  }
}

/** A resource of the primary's log for a worker: a refusal travels as the catalogue error, for the worker to send. */
function readLog(log: TransparencyLog, resource: string, query: string): LogReply {
  try {
    return logDocument(log, resource, query);
  } catch (err) {
    if (!(err instanceof HttpError)) throw err;
    return { error: { code: err.code, message: err.message, param: err.param } };
  }
}

/** A worker's entry appended to the primary's log, answered with its index once on disk; a refusal travels as the catalogue error. */
async function appendDurably(log: TransparencyLog, entry: string, receiptId: string): Promise<LogAppendReply> {
  try {
    const index = log.appendEntry(entry, receiptId);
    await log.whenDurable(index);
    return index;
  } catch (err) {
    if (!(err instanceof HttpError)) throw err;
    return { error: { code: err.code, message: err.message, param: err.param } };
  }
}

/** What the primary holds for every worker. */
export interface SharedState {
  admission: CountedAdmission;
  receipts: ReceiptStore;
  replays: ReplayWindow | undefined;
  /** Sees each message of calls a worker sent (the primary counts them in its metrics). */
  received?: (calls: CallBatch) => void;
  /** The whole server's metrics, for the worker a scrape reached. */
  scrape?: () => Promise<string>;
  /** `limits.buffer_budget_bytes`, for all workers together: each worker leases from it (src/workers/leased-budget.ts). */
  buffers?: MemoryBudget;
  /** The transparency log's sequencer: every worker's receipts are appended to it, and /v1/log/ is read from it. */
  log?: TransparencyLog;
}

/**
 * The primary's end for one worker. Requests the worker was admitted for and has not finished are
 * remembered, so a worker that dies does not keep their slots: `releaseAll` frees them when it exits.
 */
export function answerWorker(worker: Worker, shared: SharedState): { releaseAll(): void } {
  const { admission, receipts, replays, received, scrape, log } = shared;
  const admitted = new Map<string, number>();
  // What this worker leased of the memory budget: all of it comes back when the worker exits.
  const lease = shared.buffers?.hold();
  const run = async (call: PrimaryCall): Promise<unknown> => {
    switch (call.op) {
      case 'limits.admit': {
        const verdict = await admission.admit(call.keyHash);
        if (verdict.admitted) admitted.set(call.keyHash, (admitted.get(call.keyHash) ?? 0) + 1);
        return verdict;
      }
      case 'receipts.put':
        return receipts.put(call.receiptId, ownerFrom(call.owner), call.jws);
      case 'receipts.get':
        return receipts.get(call.receiptId, ownerFrom(call.owner));
      case 'replays.claim':
        if (replays === undefined) throw new InvariantError('EHBP is off');
        return replays.claim(call.id);
      case 'metrics.scrape':
        if (scrape === undefined) throw new InvariantError('no metrics');
        return scrape();
      case 'budget.lease':
        if (lease === undefined) return 0;
        if (await lease.grow(call.bytes)) return call.bytes;
        return (await lease.grow(call.least)) ? call.least : 0;
      case 'log.append':
        if (log === undefined) throw new InvariantError('no transparency log');
        return appendDurably(log, call.entry, call.receiptId);
      case 'log.read':
        if (log === undefined) throw new InvariantError('no transparency log');
        return readLog(log, call.resource, call.query);
    }
  };
  const finish = (notice: PrimaryNotice) => {
    if (notice.op === 'budget.return') {
      lease?.shrink(notice.bytes);
      return;
    }
    const count = admitted.get(notice.keyHash) ?? 0;
    if (count === 0) return;
    if (count === 1) admitted.delete(notice.keyHash);
    else admitted.set(notice.keyHash, count - 1);
    admission.finish(notice.keyHash, notice.tokensUsed);
  };
  const answers = new Outbox<Answer>((batch) => {
    if (!worker.isConnected()) return;
    const message: ToWorker = { type: 'sigil:answers', answers: batch };
    worker.send(message);
  });
  worker.on('message', (m: ToPrimary) => {
    if (m?.type !== 'sigil:calls') return;
    received?.(m.calls);
    for (const item of m.calls) {
      if ('notice' in item) {
        finish(item.notice);
        continue;
      }
      const { id, call } = item;
      run(call).then(
        (value) => answers.push({ id, value }),
        (err: Error) => answers.push({ id, error: err.message }),
      );
    }
  });
  return {
    releaseAll: () => {
      for (const [keyHash, count] of admitted) for (let i = 0; i < count; i++) admission.finish(keyHash, 0);
      admitted.clear();
      lease?.release();
    },
  };
}
