import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestLines, startTestSigil, type TestSigil } from '../support/sigil.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';

let engine: TestEngine;
let sigil: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  engine.reply = 'one two three four';
  sigil = await startTestSigil({ upstreams: { main: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
});
afterAll(async () => {
  await sigil.close();
  await engine.close();
});

const keyId = (key: string) => createHash('sha256').update(key).digest('hex').slice(0, 12);
const chat = (key: string, headers: Record<string, string> = {}) =>
  fetch(`${sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hello there' }] }),
  });
const metrics = async () => (await fetch(`${sigil.url}/metrics`)).text();
const value = (text: string, series: string) => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
};

describe('usage metrics', () => {
  it('count prompt and completion tokens per model and API key id, never the key', async () => {
    const before = sigil.logs.length;
    const answer = (await (await chat(sigil.key)).json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
    await (await chat(sigil.key)).text();
    await (await chat(sigil.otherKey)).text();
    await requestLines(sigil, before, 3);
    const text = await metrics();
    const { prompt_tokens, completion_tokens } = answer.usage;
    expect(completion_tokens).toBe(4);
    expect(value(text, `sigil_prompt_tokens_total{model="m",key_id="${keyId(sigil.key)}"}`)).toBe(2 * prompt_tokens);
    expect(value(text, `sigil_completion_tokens_total{model="m",key_id="${keyId(sigil.key)}"}`)).toBe(8);
    expect(value(text, `sigil_completion_tokens_total{model="m",key_id="${keyId(sigil.otherKey)}"}`)).toBe(4);
    expect(text).not.toContain(sigil.key.slice(-16));
    const [line] = await requestLines(sigil, before);
    expect(line).toMatchObject({ key_id: keyId(sigil.key), upstream: 'main' });
  });

  it('time and count each engine request per upstream', async () => {
    const text = await metrics();
    expect(value(text, 'sigil_upstream_requests_total{upstream="main",outcome="200"}')).toBeGreaterThanOrEqual(3);
    expect(value(text, 'sigil_upstream_duration_seconds_count{upstream="main"}')).toBe(
      value(text, 'sigil_upstream_requests_total{upstream="main",outcome="200"}'),
    );
    expect(value(text, 'sigil_upstream_up{upstream="main"}')).toBe(1);
  });

  it('include build info and Node process metrics', async () => {
    const text = await metrics();
    const version = (await import('../../package.json', { with: { type: 'json' } })).default.version;
    expect(value(text, `sigil_build_info{version="${version}",node_version="${process.version}"}`)).toBe(1);
    expect(value(text, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(text).toContain('# TYPE nodejs_eventloop_lag_seconds gauge');
  });
});

describe('request correlation', () => {
  it("keeps a client's X-Request-Id, answers with it, logs it and forwards it to the engine", async () => {
    const before = sigil.logs.length;
    const sent = engine.requests.length;
    const res = await chat(sigil.key, { 'x-request-id': 'client-req-42' });
    await res.text();
    expect(res.headers.get('x-request-id')).toBe('client-req-42');
    expect((await requestLines(sigil, before))[0]).toMatchObject({ request_id: 'client-req-42' });
    expect(engine.requests[sent]!.headers['x-request-id']).toBe('client-req-42');
  });

  it('replaces an X-Request-Id that is not a plain id, and forwards its own', async () => {
    const sent = engine.requests.length;
    const res = await chat(sigil.key, { 'x-request-id': 'has spaces {"and":"json"}' });
    await res.text();
    const id = res.headers.get('x-request-id')!;
    expect(id).toMatch(/^[0-9a-f]{16}$/);
    expect(engine.requests[sent]!.headers['x-request-id']).toBe(id);
  });

  it('passes a W3C traceparent and tracestate on to the engine, and drops a malformed one', async () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    let sent = engine.requests.length;
    await (await chat(sigil.key, { traceparent, tracestate: 'vendor=abc' })).text();
    expect(engine.requests[sent]!.headers.traceparent).toBe(traceparent);
    expect(engine.requests[sent]!.headers.tracestate).toBe('vendor=abc');
    sent = engine.requests.length;
    await (await chat(sigil.key, { traceparent: '00-00000000000000000000000000000000-00f067aa0ba902b7-01', tracestate: 'vendor=abc' })).text();
    expect(engine.requests[sent]!.headers.traceparent).toBeUndefined();
    expect(engine.requests[sent]!.headers.tracestate).toBeUndefined();
  });
});
