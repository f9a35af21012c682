import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/free-port.ts';
import { requestLines, startTestSigil, type TestSigil } from '../support/sigil.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { waitFor } from '../support/wait-for.ts';

let live: TestEngine;
let revived: TestEngine | undefined;
let deadPort: number;
let sigil: TestSigil;

beforeAll(async () => {
  live = await startTestEngine({ modelNames: ['m'] });
  deadPort = await freePort();
  sigil = await startTestSigil({
    upstreams: { first: { url: `http://127.0.0.1:${deadPort}/v1`, health_check_interval_ms: 100 }, second: { url: live.baseUrl } },
    models: [{ id: 'm', upstream: ['first', 'second'] }],
  });
});
afterAll(async () => {
  await sigil.close();
  await live.close();
  await revived?.close();
});

const chat = () =>
  fetch(`${sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  });

const metrics = async () => (await fetch(`${sigil.url}/metrics`)).text();
const value = (text: string, series: string) => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
};

describe('a model served by several upstreams', () => {
  it('skips an unreachable first upstream for the next, and says so in the log and the metrics', async () => {
    const before = sigil.logs.length;
    const res = await chat();
    expect(res.status).toBe(200);
    const [line] = await requestLines(sigil, before);
    expect(line).toMatchObject({ status: 200, upstream: 'second' });
    const text = await metrics();
    expect(value(text, 'sigil_upstream_failovers_total{from_upstream="first",to_upstream="second"}')).toBe(1);
    expect(value(text, 'sigil_upstream_up{upstream="first"}')).toBe(0);
    expect(value(text, 'sigil_upstream_up{upstream="second"}')).toBe(1);
    expect(value(text, 'sigil_upstream_requests_total{upstream="first",outcome="upstream_unreachable"}')).toBe(1);
    expect(value(text, 'sigil_upstream_requests_total{upstream="second",outcome="200"}')).toBe(1);
  });

  it('sends the next requests straight to the upstream that is up, without trying the down one again', async () => {
    expect((await chat()).status).toBe(200);
    const text = await metrics();
    expect(value(text, 'sigil_upstream_failovers_total{from_upstream="first",to_upstream="second"}')).toBe(1);
    expect(value(text, 'sigil_upstream_requests_total{upstream="first",outcome="upstream_unreachable"}')).toBe(1);
    expect(value(text, 'sigil_upstream_requests_total{upstream="second",outcome="200"}')).toBe(2);
  });

  it('goes back to the first upstream once a health check finds it answering', async () => {
    revived = await startTestEngine({ modelNames: ['m'], port: deadPort });
    await waitFor('the first upstream up again', async () => value(await metrics(), 'sigil_upstream_up{upstream="first"}') === 1);
    expect(value(await metrics(), 'sigil_upstream_up{upstream="first"}')).toBe(1);
    expect(revived.requests.map((r) => `${r.method} ${r.path}`)).toContain('GET /v1/models');
    const before = sigil.logs.length;
    expect((await chat()).status).toBe(200);
    expect((await requestLines(sigil, before))[0]).toMatchObject({ upstream: 'first' });
    expect(revived.requests.filter((r) => r.method === 'POST')).toHaveLength(1);
  });
});
