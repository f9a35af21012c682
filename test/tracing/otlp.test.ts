import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { waitFor } from '../support/wait-for.ts';

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Array<{ key: string; value: Record<string, unknown> }>;
}

/** A local OTLP/HTTP receiver: keeps every span posted to /v1/traces (the JSON encoding the exporter sends). */
let receiver: Server;
let receiverUrl: string;
const spans: OtlpSpan[] = [];
const bodies: string[] = [];
let engine: TestEngine;
let sigil: TestSigil;
let untraced: TestSigil;

const PROMPT = 'PROMPT-SECRET-otel-5e1';
const REPLY = 'COMPLETION-SECRET-otel-9b2';

beforeAll(async () => {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      bodies.push(text);
      const parsed = JSON.parse(text) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: OtlpSpan[] }> }> };
      for (const r of parsed.resourceSpans) for (const s of r.scopeSpans) spans.push(...s.spans);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/v1/traces`;
  engine = await startTestEngine({ modelNames: ['m'] });
  engine.reply = REPLY;
  sigil = await startTestSigil({
    upstreams: { main: { url: engine.baseUrl } },
    models: [{ id: 'm' }],
    config: { tracing: { otlp_endpoint: receiverUrl, service_name: 'sigil-test', export_delay_ms: 100 } },
  });
  untraced = await startTestSigil({ upstreams: { main: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
});
afterAll(async () => {
  await Promise.all([sigil.close(), untraced.close()]);
  await engine.close();
  receiver.close();
});

const chat = (target: TestSigil, headers: Record<string, string>) =>
  fetch(`${target.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${target.key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: PROMPT }], stream: true, stream_options: { include_usage: true } }),
  }).then((r) => r.text());

const spanOfTrace = (traceId: string): Promise<OtlpSpan> => waitFor(`the span of trace ${traceId}`, () => spans.find((s) => s.traceId === traceId));

const attribute = (span: OtlpSpan, key: string) => {
  const value = span.attributes.find((a) => a.key === key)?.value;
  return value === undefined ? undefined : (value.stringValue ?? value.intValue ?? value.boolValue);
};

describe('OpenTelemetry tracing with an OTLP endpoint', () => {
  it("sends one server span per request to the collector, a child of the client's traceparent", async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const sent = engine.requests.length;
    const reply = await chat(sigil, { traceparent: `00-${traceId}-00f067aa0ba902b7-01`, 'x-request-id': 'otel-req-1' });
    expect(reply).toContain(REPLY);
    const span = await spanOfTrace(traceId);
    expect(span).toBeDefined();
    expect(span!.name).toBe('POST /v1/chat/completions');
    expect(span!.kind).toBe(2);
    expect(span!.parentSpanId).toBe('00f067aa0ba902b7');
    expect(attribute(span!, 'http.response.status_code')).toBe(200);
    expect(attribute(span!, 'gen_ai.request.model')).toBe('m');
    expect(attribute(span!, 'sigil.upstream')).toBe('main');
    expect(attribute(span!, 'sigil.request_id')).toBe('otel-req-1');
    expect(Number(attribute(span!, 'gen_ai.usage.output_tokens'))).toBeGreaterThan(0);
    // The engine's span is a child of Sigil's: the engine got Sigil's span id as its parent.
    expect(engine.requests[sent]!.headers.traceparent).toBe(`00-${traceId}-${span!.spanId}-01`);
  });

  it('never puts prompt or completion content in what it exports', async () => {
    await spanOfTrace('4bf92f3577b34da6a3ce929d0e0e4736');
    const all = bodies.join('\n');
    expect(all.length).toBeGreaterThan(0);
    expect(all).not.toContain(PROMPT);
    expect(all).not.toContain(REPLY);
    expect(all).not.toContain(sigil.key.slice(-16));
  });

  it('is off by default: no span, and the client traceparent goes to the engine unchanged', async () => {
    const traceId = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa';
    const traceparent = `00-${traceId}-bbbbbbbbbbbbbbbb-01`;
    const sent = engine.requests.length;
    await chat(untraced, { traceparent });
    expect(engine.requests[sent]!.headers.traceparent).toBe(traceparent);
    // A traced request after it: once its span is in, any span sent before it by then would be too.
    const later = 'cccccccccccccccccccccccccccccccc';
    await chat(sigil, { traceparent: `00-${later}-dddddddddddddddd-01` });
    await spanOfTrace(later);
    expect(spans.filter((s) => s.traceId === traceId)).toEqual([]);
  });
});
