/**
 * `/metrics` for the whole server when it runs as workers: the worker a scrape reaches asks the primary,
 * which gathers every live worker's registry over IPC and adds its own (worker replacements, the workers'
 * calls, the primary's process metrics), summed as prom-client's cluster aggregation does (counters and
 * histograms add up; a gauge says how it combines).
 */
import type { Worker } from 'node:cluster';
import { AggregatorRegistry, collectDefaultMetrics, Counter, Gauge, Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import type { CallBatch, ToWorker } from './messages.ts';

type MetricsJson = Array<MetricObjectWithValues<MetricValue<string>>>;

/** A worker that has not sent its metrics by then is left out of that scrape (it is stuck, or dying). */
const WORKER_ANSWER_MS = 2000;

export interface PrimaryMetrics {
  registry: Registry;
  replacements: Counter;
  workers: Gauge;
  /** Counts the calls and notices in one IPC message from a worker. */
  received(calls: CallBatch): void;
}

export function createPrimaryMetrics(): PrimaryMetrics {
  const registry = new Registry();
  // The primary's own CPU and memory join the workers' under the same names: the sums are the whole server's.
  collectDefaultMetrics({ register: registry });
  const calls = new Counter({
    name: 'sigil_worker_calls_total',
    help: 'Calls and notices workers sent the primary (limits, receipts, replays, metrics), by operation.',
    labelNames: ['op'],
    registers: [registry],
  });
  const messages = new Counter({
    name: 'sigil_worker_call_messages_total',
    help: 'IPC messages that carried those calls (the calls of one turn of a worker event loop travel together).',
    registers: [registry],
  });
  return {
    registry,
    replacements: new Counter({
      name: 'sigil_worker_replacements_total',
      help: 'Worker processes that died and were replaced by the primary since it started.',
      registers: [registry],
    }),
    workers: new Gauge({ name: 'sigil_workers', help: 'Worker processes running now.', registers: [registry] }),
    received: (batch) => {
      messages.inc();
      for (const item of batch) calls.inc({ op: 'notice' in item ? item.notice.op : item.call.op });
    },
  };
}

/** Every live worker's metrics and the primary's, as one Prometheus text. */
export class ClusterScrape {
  readonly #primary: PrimaryMetrics;
  readonly #waiting = new Map<number, (metrics: MetricsJson | undefined) => void>();
  #next = 0;

  constructor(primary: PrimaryMetrics) {
    this.#primary = primary;
  }

  /** The worker's answer to a `sigil:metrics-request`. */
  answered(id: number, metrics: MetricsJson): void {
    this.#waiting.get(id)?.(metrics);
  }

  async text(workers: Iterable<Worker>): Promise<string> {
    const asked = [...workers].filter((worker) => worker.isConnected()).map((worker) => this.#ask(worker));
    const answers = await Promise.all(asked);
    const all = [...answers.filter((a) => a !== undefined), await this.#primary.registry.getMetricsAsJSON()];
    return AggregatorRegistry.aggregate(all as Parameters<typeof AggregatorRegistry.aggregate>[0]).metrics();
  }

  #ask(worker: Worker): Promise<MetricsJson | undefined> {
    const id = this.#next++;
    return new Promise((resolve) => {
      const gone = () => done(undefined);
      const timer = setTimeout(gone, WORKER_ANSWER_MS);
      const done = (metrics: MetricsJson | undefined) => {
        clearTimeout(timer);
        worker.off('exit', gone);
        this.#waiting.delete(id);
        resolve(metrics);
      };
      this.#waiting.set(id, done);
      worker.once('exit', gone);
      const request: ToWorker = { type: 'sigil:metrics-request', id };
      worker.send(request);
    });
  }
}
