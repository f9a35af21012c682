import { setTimeout as sleep } from 'node:timers/promises';
import { describeError } from '../../protocol/sigil-error.ts';
import { fail, pass, type Check } from '../check.ts';
import type { VerifiedCheckpoint } from '../../protocol/tlog/checkpoint.ts';
import { fetchCheckpoint, LeafNotFound, receiptIdOf, verifyLogConsistency, verifyReceiptInLog, type TrustedLog } from './log-client.ts';
import { checkAgainstSeen } from './seen-checkpoints.ts';
import { parseVerifierKey } from '../../protocol/tlog/note.ts';
import type { TransparencyLogBinding } from '../../protocol/attestation.ts';

/**
 * A client's watch over the receipts it receives (docs/log.md, "Verifying"): each receipt's leaf is proven included
 * under a checkpoint signed by the attested log key once its batch is integrated, and every checkpoint it sees must
 * extend the last one it kept. The receipt is answered at once; this runs after, and ends in a verdict in plain words.
 */

/** The log's maximum merge delay (docs/log.md): a receipt's batch is integrated within this many ms of its signature. */
export const MAX_MERGE_DELAY_MS = 10_000;

/**
 * The log a verified attestation binds (`binding.transparency_log`), served under the service's `/v1/log/`:
 * `service` is its base URL, with or without a trailing `/v1`.
 */
export function serviceLog(binding: TransparencyLogBinding, service: string | URL, fetchLog?: typeof fetch): TrustedLog {
  const url = new URL(service);
  const root = url.pathname.replace(/\/+$/, '').replace(/\/v1$/, '');
  const log: TrustedLog = { url: `${url.origin}${root}/v1/log`, origin: binding.origin, key: parseVerifierKey(binding.vkey) };
  if (fetchLog !== undefined) log.fetch = fetchLog;
  return log;
}

/** One receipt's place in the log, as checked. */
export interface InclusionVerdict {
  ok: boolean;
  /** The receipt's `receipt_id` claim. */
  receiptId: string | undefined;
  /** Its leaf index, once found. */
  index?: number;
  /** The checkpoint it was proven under. */
  checkpoint?: { origin: string; size: number; root: string };
  /** `log.checkpoint`, `log.consistency`, `log.inclusion`: each with a sentence. */
  checks: Check[];
  /** One sentence: what was proven, or what failed. */
  detail: string;
}

export interface InclusionWatchOptions {
  /**
   * The log as the verified attestation names it. Called with `fresh` true when a checkpoint is not signed by its key
   * (the service restarted with a new log key): the caller re-attests and returns the log its new attestation binds.
   */
  log: (fresh: boolean) => Promise<TrustedLog>;
  /** How long to wait for a receipt's batch: default the maximum merge delay and 2 s for the network. */
  waitMs?: number;
  /** How often to look at the checkpoint while waiting; default 250 ms. */
  pollMs?: number;
  /** A file keeping the largest checkpoint seen per origin across runs (`sigil log --state` reads and writes the same format). */
  stateFile?: string;
}

interface Seen {
  log: TrustedLog;
  checkpoint: VerifiedCheckpoint;
  checks: Check[];
}

const CLOSED = 'the client was closed before the receipt could be found in the log';

export class InclusionWatch {
  private readonly kept = new Map<string, { size: number; root: Buffer }>();
  private reading: Promise<Seen | Check[]> | undefined;
  private readonly closing = new AbortController();

  constructor(private readonly options: InclusionWatchOptions) {}

  /** Stops waiting: pending checks end with a failed `log.inclusion` that says so. */
  close(): void {
    this.closing.abort();
  }

  /**
   * Checks that the log holds `jws` (at `index` when the response named it, else found by its receipt id), waiting
   * for its batch up to `waitMs`. Never rejects: a failure is a verdict with `ok: false`.
   */
  async check(jws: string, index?: number): Promise<InclusionVerdict> {
    const receiptId = receiptIdOf(jws);
    const waitMs = this.options.waitMs ?? MAX_MERGE_DELAY_MS + 2_000;
    const deadline = Date.now() + waitMs;
    const where = index === undefined ? `receipt id ${String(receiptId)}` : `index ${index}`;
    for (;;) {
      if (this.closing.signal.aborted) return verdict(receiptId, [fail('log.inclusion', CLOSED)]);
      const seen = await this.latest();
      if (Array.isArray(seen)) return verdict(receiptId, seen);
      const { log, checkpoint, checks } = seen;
      if (index === undefined || checkpoint.size > index) {
        try {
          const found = await verifyReceiptInLog(log, jws, { checkpoint, ...(index === undefined ? {} : { index }) });
          const inclusion = pass(
            'log.inclusion',
            `receipt ${String(receiptId)} is entry ${found.index} of the log: its inclusion proof leads from SHA-256 of the receipt to the root of the checkpoint of ${checkpoint.size} entries`,
          );
          return verdict(receiptId, [...checks, inclusion], found.index, checkpoint);
        } catch (err) {
          // By receipt id, a leaf not found yet may be in a batch still being integrated; at a covered index, nothing may be missing.
          if (!(err instanceof LeafNotFound) || index !== undefined) return verdict(receiptId, [...checks, fail('log.inclusion', describeError(err))]);
        }
      }
      if (Date.now() >= deadline) {
        const why = `the log's latest checkpoint (${checkpoint.size} entries) still has no leaf at ${where} ${Math.round(waitMs / 1000)} s after the receipt arrived, beyond the log's maximum merge delay of ${MAX_MERGE_DELAY_MS / 1000} s: the service signed a receipt it did not log`;
        return verdict(receiptId, [...checks, fail('log.inclusion', why)]);
      }
      try {
        await sleep(this.options.pollMs ?? 250, undefined, { signal: this.closing.signal });
      } catch {
        return verdict(receiptId, [fail('log.inclusion', CLOSED)]);
      }
    }
  }

  /** The log's latest checkpoint, opened with the attested key and checked against the last one kept: one read at a time, shared by every waiting check. */
  private latest(): Promise<Seen | Check[]> {
    return (this.reading ??= this.read().finally(() => (this.reading = undefined)));
  }

  private async read(): Promise<Seen | Check[]> {
    let log: TrustedLog;
    try {
      log = await this.options.log(false);
    } catch (err) {
      return [fail('log.checkpoint', describeError(err))];
    }
    let checkpoint: VerifiedCheckpoint;
    try {
      try {
        checkpoint = await fetchCheckpoint(log);
      } catch (err) {
        if ((err as { code?: string }).code !== 'ERR_TLOG_SIGNATURE') throw err;
        // Signed by another key: the service may have restarted with a new one. Its new attestation says which.
        const fresh = await this.options.log(true);
        if (fresh.key.publicKey.equals(log.key.publicKey)) throw err;
        log = fresh;
        checkpoint = await fetchCheckpoint(log);
      }
    } catch (err) {
      return [fail('log.checkpoint', `${describeError(err)} (the log the attestation names: ${log.origin})`)];
    }
    const signed = pass(
      'log.checkpoint',
      `the attested log key signed the checkpoint of origin ${checkpoint.origin}: ${checkpoint.size} entries, root ${checkpoint.root.toString('base64')}`,
    );
    const previous = this.kept.get(checkpoint.origin);
    try {
      const before = this.options.stateFile === undefined ? previous : await checkAgainstSeen(this.options.stateFile, log, checkpoint);
      if (this.options.stateFile === undefined && previous !== undefined) await verifyLogConsistency(log, previous, checkpoint);
      if (previous === undefined || checkpoint.size > previous.size) this.kept.set(checkpoint.origin, { size: checkpoint.size, root: checkpoint.root });
      const consistency = pass(
        'log.consistency',
        before === undefined
          ? `the first checkpoint of ${checkpoint.origin} this client has seen; kept, so every later one must extend it`
          : `the log's consistency proof shows the tree of ${before.size} entries seen before is a prefix of this one of ${checkpoint.size}: it only grew`,
      );
      return { log, checkpoint, checks: [signed, consistency] };
    } catch (err) {
      return [
        signed,
        fail(
          'log.consistency',
          `${describeError(err)}: the log's checkpoint of ${checkpoint.size} entries does not extend the one this client kept before, so the log forked, was truncated or was rewritten`,
        ),
      ];
    }
  }
}

function verdict(receiptId: string | undefined, checks: Check[], index?: number, checkpoint?: VerifiedCheckpoint): InclusionVerdict {
  const failed = checks.find((c) => !c.ok);
  const out: InclusionVerdict = {
    ok: failed === undefined && checks.some((c) => c.name === 'log.inclusion'),
    receiptId,
    checks,
    detail:
      failed !== undefined
        ? `${failed.name}: ${failed.detail}`
        : `receipt ${String(receiptId)} is entry ${String(index)} of the log ${checkpoint?.origin ?? ''}, proven under a checkpoint of ${checkpoint?.size ?? 0} entries signed by the attested log key, which extends every checkpoint seen before`,
  };
  if (index !== undefined) out.index = index;
  if (checkpoint !== undefined) out.checkpoint = { origin: checkpoint.origin, size: checkpoint.size, root: checkpoint.root.toString('base64') };
  return out;
}
