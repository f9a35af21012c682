import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Prometheus metrics of one Sigil instance (its own registry, so several can live in one process). */
export interface SigilMetrics {
  registry: Registry;
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
}

const LATENCY_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

export function createMetrics(): SigilMetrics {
  const registry = new Registry();
  return {
    registry,
    requests: new Counter({ name: 'sigil_requests_total', help: 'Requests by route, model and status.', labelNames: ['route', 'model', 'status'], registers: [registry] }),
    duration: new Histogram({ name: 'sigil_request_duration_seconds', help: 'Time from request to the last byte of the response.', labelNames: ['route'], buckets: LATENCY_BUCKETS, registers: [registry] }),
    timeToFirstToken: new Histogram({ name: 'sigil_time_to_first_token_seconds', help: 'Time from request to the first stream chunk sent to the client.', labelNames: ['model'], buckets: LATENCY_BUCKETS, registers: [registry] }),
    activeStreams: new Gauge({ name: 'sigil_active_streams', help: 'Streams being relayed now.', registers: [registry] }),
    receiptsSigned: new Counter({ name: 'sigil_receipts_signed_total', help: 'Receipts signed, by type.', labelNames: ['type'], registers: [registry] }),
    engineErrors: new Counter({ name: 'sigil_engine_errors_total', help: 'Engine failures seen by clients, by error code.', labelNames: ['code'], registers: [registry] }),
    engineReceiptComments: new Counter({ name: 'sigil_engine_receipt_comments_dropped_total', help: 'Receipt comment lines engines sent in their streams, dropped: only Sigil writes receipts.', registers: [registry] }),
    httpRejections: new Counter({ name: 'sigil_http_rejections_total', help: 'Connections refused at the HTTP level, before a request existed, by reason.', labelNames: ['reason'], registers: [registry] }),
  };
}
