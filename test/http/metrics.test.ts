import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startForwardingProxy } from '../support/forwarding-proxy.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { waitFor } from '../support/wait-for.ts';

let engine: TestEngine;
let sigil: TestSigil;
let guarded: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({ upstreams: { main: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
  process.env.SIGIL_TEST_METRICS_TOKEN = 'scrape-token-1';
  guarded = await startTestSigil({
    upstreams: { main: { url: engine.baseUrl } },
    models: [{ id: 'm' }],
    config: { metrics: { bearer_token_env: 'SIGIL_TEST_METRICS_TOKEN' } },
  });
});

afterAll(async () => {
  await Promise.all([sigil.close(), guarded.close()]);
  await engine.close();
});

const chat = (stream: boolean, receipt = false) =>
  fetch(`${sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', ...(receipt ? { 'x-service-receipt': 'true' } : {}) },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream }),
  }).then((r) => r.text());

const metric = (text: string, line: string) => {
  const found = text.split('\n').find((l) => l.startsWith(line + ' '));
  return found === undefined ? undefined : Number(found.slice(line.length + 1));
};

describe('GET /metrics', () => {
  it('counts requests by route, model and status, streams, receipts and engine errors', async () => {
    await chat(false, true);
    await chat(true, true);
    await chat(true);
    engine.behaviour = { status: 500 };
    await chat(false);
    engine.behaviour = {};
    // Each exchange is counted as its connection closes, a moment after the client has the body.
    const { res, text } = await waitFor('the four exchanges counted', async () => {
      const scraped = await fetch(`${sigil.url}/metrics`);
      const body = await scraped.text();
      return metric(body, 'sigil_request_duration_seconds_count{route="/v1/chat/completions"}') === 4 && { res: scraped, text: body };
    });
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(metric(text, 'sigil_requests_total{route="/v1/chat/completions",model="m",status="200"}')).toBe(3);
    expect(metric(text, 'sigil_requests_total{route="/v1/chat/completions",model="m",status="502"}')).toBe(1);
    expect(metric(text, 'sigil_receipts_signed_total{type="message"}')).toBe(2);
    expect(metric(text, 'sigil_receipts_signed_total{type="model"}')).toBe(1);
    expect(metric(text, 'sigil_engine_errors_total{code="upstream_server_error"}')).toBe(1);
    expect(metric(text, 'sigil_time_to_first_token_seconds_count{model="m"}')).toBe(2);
    expect(metric(text, 'sigil_request_duration_seconds_count{route="/v1/chat/completions"}')).toBe(4);
    expect(metric(text, 'sigil_active_streams')).toBe(0);
  });

  it('needs the bearer token when one is configured', async () => {
    const denied = await fetch(`${guarded.url}/metrics`);
    expect(denied.status).toBe(401);
    expect((await denied.json()).error.code).toBe('invalid_api_key');
    const allowed = await fetch(`${guarded.url}/metrics`, { headers: { authorization: 'Bearer scrape-token-1' } });
    expect(allowed.status).toBe(200);
    expect(await allowed.text()).toContain('sigil_active_streams 0');
  });

  it('without a token answers only a loopback peer that forwards for nobody, and says so at start', async () => {
    expect(sigil.logs.some((l) => l.includes('"metrics":"loopback only"'))).toBe(true);
    expect(guarded.logs.some((l) => l.includes('"metrics":"bearer token"'))).toBe(true);
    expect((await fetch(`${sigil.url}/metrics`)).status).toBe(200);
    // A load balancer on this host reaches Sigil from loopback, but for someone else: refused, as a forwarded header says.
    for (const header of ['x-forwarded-for', 'forwarded', 'x-real-ip']) {
      const forwarded = await fetch(`${sigil.url}/metrics`, { headers: { [header]: header === 'forwarded' ? 'for=203.0.113.9' : '203.0.113.9' } });
      expect(forwarded.status).toBe(403);
      expect((await forwarded.json()).error.code).toBe('metrics_loopback_only');
    }
    const proxy = await startForwardingProxy(sigil.url, { forwardedFor: () => '203.0.113.9' });
    try {
      const viaProxy = await fetch(`${proxy.url}/metrics`);
      expect(viaProxy.status).toBe(403);
      expect(await viaProxy.text()).not.toContain('sigil_');
    } finally {
      await proxy.close();
    }
  });
});
