import type { IncomingHttpHeaders } from 'node:http';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';

export interface TracingSettings {
  otlp_endpoint?: string | undefined;
  service_name: string;
  export_delay_ms: number;
}

/** What a request's span records when it ends: ids, route, outcome and counts, never content or keys. */
export interface SpanOutcome {
  request_id: string;
  method: string;
  route: string;
  status?: number | undefined;
  model?: string | undefined;
  upstream?: string | undefined;
  stream?: boolean | undefined;
  error_code?: string | undefined;
  usage?: { prompt_tokens: number; completion_tokens: number } | undefined;
}

export interface RequestTracing {
  /**
   * Starts the request's server span, a child of the client's `traceparent` when one came, and puts the
   * span's own `traceparent` in `headers`, so the engine's span is a child of Sigil's.
   */
  start(headers: IncomingHttpHeaders): (outcome: SpanOutcome) => void;
  /** Sends the spans not sent yet, then stops. */
  close(): Promise<void>;
}

const propagator = new W3CTraceContextPropagator();
const getter = {
  keys: (carrier: IncomingHttpHeaders) => Object.keys(carrier),
  get: (carrier: IncomingHttpHeaders, key: string) => carrier[key],
};
const setter = { set: (carrier: IncomingHttpHeaders, key: string, value: string) => void (carrier[key] = value) };

function endSpan(span: Span, outcome: SpanOutcome): void {
  span.updateName(`${outcome.method} ${outcome.route}`);
  span.setAttributes({
    'http.request.method': outcome.method,
    'http.route': outcome.route,
    'sigil.request_id': outcome.request_id,
    ...(outcome.status === undefined ? {} : { 'http.response.status_code': outcome.status }),
    ...(outcome.model === undefined ? {} : { 'gen_ai.request.model': outcome.model }),
    ...(outcome.upstream === undefined ? {} : { 'sigil.upstream': outcome.upstream }),
    ...(outcome.stream === undefined ? {} : { 'sigil.stream': outcome.stream }),
    ...(outcome.error_code === undefined ? {} : { 'error.type': outcome.error_code }),
    ...(outcome.usage === undefined
      ? {}
      : { 'gen_ai.usage.input_tokens': outcome.usage.prompt_tokens, 'gen_ai.usage.output_tokens': outcome.usage.completion_tokens }),
  });
  if ((outcome.status ?? 0) >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  span.end();
}

/** OpenTelemetry tracing over OTLP/HTTP, or undefined when no endpoint is configured (the default). */
export function createRequestTracing(settings: TracingSettings): RequestTracing | undefined {
  if (settings.otlp_endpoint === undefined) return undefined;
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': settings.service_name }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: settings.otlp_endpoint }), { scheduledDelayMillis: settings.export_delay_ms })],
  });
  const tracer: Tracer = provider.getTracer('sigil');
  return {
    start(headers) {
      const parent = propagator.extract(ROOT_CONTEXT, headers, getter);
      const span = tracer.startSpan('request', { kind: SpanKind.SERVER }, parent);
      delete headers.tracestate;
      propagator.inject(trace.setSpan(parent, span), headers, setter);
      return (outcome) => endSpan(span, outcome);
    },
    close: () => provider.shutdown(),
  };
}
