import { readFileSync } from 'node:fs';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Prometheus metrics of one Sigil instance (its own registry, so several can live in one process). */
export interface SigilMetrics {
  registry: Registry;
  /** The text a scrape of /metrics answers: this registry's, or a worker's view of the whole server (src/workers/metrics.ts). */
  scrape(): Promise<string>;
  requests: Counter<'route' | 'model' | 'status'>;
  duration: Histogram<'route'>;
  timeToFirstToken: Histogram<'model'>;
  activeStreams: Gauge;
  receiptsSigned: Counter<'type'>;
  engineErrors: Counter<'code'>;
  /** Connections refused before a request existed (malformed HTTP, header timeout, headers too large). */
  httpRejections: Counter<'reason'>;
  /** `: receipt` comments an engine put in its stream, dropped (only Sigil writes receipts). */
  engineReceiptComments: Counter;
  /** Tokens the engines reported, by catalogue model and API key id (never the key). */
  promptTokens: Counter<'model' | 'key_id'>;
  completionTokens: Counter<'model' | 'key_id'>;
  /** Each engine request: time to the engine's response headers, by upstream. */
  upstreamDuration: Histogram<'upstream'>;
  /** Each engine request by upstream and outcome: the engine's HTTP status, or the error code when it gave none. */
  upstreamRequests: Counter<'upstream' | 'outcome'>;
  /** Requests moved on from an unreachable engine to the next one. */
  upstreamFailovers: Counter<'from_upstream' | 'to_upstream'>;
  /** 1 while an upstream is taken as reachable, 0 while it is skipped until a health check answers. */
  upstreamUp: Gauge<'upstream'>;
}

/** The package's version, for sigil_build_info: package.json is two folders up from src/metrics and dist/metrics. */
const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

const LATENCY_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

export function createMetrics(): SigilMetrics {
  const registry = new Registry();
  // Node's process metrics (CPU, memory, event-loop lag, handles) under their usual names, as vLLM and LiteLLM export them.
  collectDefaultMetrics({ register: registry });
  new Gauge({
    name: 'sigil_build_info',
    help: 'Always 1; the labels say which Sigil and Node run.',
    labelNames: ['version', 'node_version'],
    // Summed over workers it would count processes; every process runs the same build.
    aggregator: 'first',
    registers: [registry],
  }).set({ version: VERSION, node_version: process.version }, 1);
  return {
    registry,
    scrape: () => registry.metrics(),
    requests: new Counter({
      name: 'sigil_requests_total',
      help: 'Requests by route, model and status.',
      labelNames: ['route', 'model', 'status'],
      registers: [registry],
    }),
    duration: new Histogram({
      name: 'sigil_request_duration_seconds',
      help: 'Time from request to the last byte of the response.',
      labelNames: ['route'],
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    timeToFirstToken: new Histogram({
      name: 'sigil_time_to_first_token_seconds',
      help: 'Time from request to the first stream chunk sent to the client.',
      labelNames: ['model'],
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    activeStreams: new Gauge({ name: 'sigil_active_streams', help: 'Streams being relayed now.', registers: [registry] }),
    receiptsSigned: new Counter({ name: 'sigil_receipts_signed_total', help: 'Receipts signed, by type.', labelNames: ['type'], registers: [registry] }),
    engineErrors: new Counter({
      name: 'sigil_engine_errors_total',
      help: 'Engine failures seen by clients, by error code.',
      labelNames: ['code'],
      registers: [registry],
    }),
    engineReceiptComments: new Counter({
      name: 'sigil_engine_receipt_comments_dropped_total',
      help: 'Receipt comment lines engines sent in their streams, dropped: only Sigil writes receipts.',
      registers: [registry],
    }),
    httpRejections: new Counter({
      name: 'sigil_http_rejections_total',
      help: 'Connections refused at the HTTP level, before a request existed, by reason.',
      labelNames: ['reason'],
      registers: [registry],
    }),
    promptTokens: new Counter({
      name: 'sigil_prompt_tokens_total',
      help: 'Prompt tokens the engines reported, by model and API key id.',
      labelNames: ['model', 'key_id'],
      registers: [registry],
    }),
    completionTokens: new Counter({
      name: 'sigil_completion_tokens_total',
      help: 'Completion tokens the engines reported, by model and API key id.',
      labelNames: ['model', 'key_id'],
      registers: [registry],
    }),
    upstreamDuration: new Histogram({
      name: 'sigil_upstream_duration_seconds',
      help: 'Seconds until an engine sent its response headers.',
      labelNames: ['upstream'],
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    upstreamRequests: new Counter({
      name: 'sigil_upstream_requests_total',
      help: 'Engine requests by upstream and outcome: the HTTP status of the engine, or the error code when none came.',
      labelNames: ['upstream', 'outcome'],
      registers: [registry],
    }),
    upstreamFailovers: new Counter({
      name: 'sigil_upstream_failovers_total',
      help: 'Requests moved on from an unreachable engine to the next.',
      labelNames: ['from_upstream', 'to_upstream'],
      registers: [registry],
    }),
    upstreamUp: new Gauge({
      name: 'sigil_upstream_up',
      help: '1 while an upstream is taken as reachable, 0 while it is skipped until a health check answers.',
      labelNames: ['upstream'],
      // With workers: 1 only while every worker takes it as reachable.
      aggregator: 'min',
      registers: [registry],
    }),
  };
}
