import { afterEach, describe, expect, it } from 'vitest';
import { MemoryLimitCounters, type LimitCounters } from '../../src/limits/counters.ts';
import { waitFor } from '../support/wait-for.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { requestLines, startTestSigil, type TestSigil } from '../support/sigil.ts';

/** Counters the test can watch: tokens charged and slots released, and (when `gated`) each `acquire` held until the test lets it on. */
class WatchedCounters extends MemoryLimitCounters {
  charged = 0;
  released = 0;
  readonly held: Array<() => void> = [];
  constructor(private gated = false) {
    super();
  }
  override async add(name: string, amount: number, windowMs: number) {
    const count = await super.add(name, amount, windowMs);
    if (name.startsWith('tpm:')) this.charged += amount;
    return count;
  }
  override async acquire(name: string, max: number): Promise<boolean> {
    if (this.gated) await new Promise<void>((r) => this.held.push(r));
    return super.acquire(name, max);
  }
  override async release(name: string): Promise<void> {
    await super.release(name);
    this.released++;
  }
  /** Lets every held `acquire` on, and the ones after it through at once. */
  open(): void {
    this.gated = false;
    for (const go of this.held.splice(0)) go();
  }
}

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanup.length) await cleanup.pop()!();
});

async function setup(limits: Record<string, unknown>, counters?: LimitCounters): Promise<{ engine: TestEngine; sigil: TestSigil }> {
  const engine = await startTestEngine({ modelNames: ['m'] });
  const sigil = await startTestSigil({
    upstreams: { main: { url: engine.baseUrl } },
    models: [{ id: 'm' }],
    config: { limits },
    start: counters ? { limitCounters: counters } : {},
  });
  cleanup.push(
    () => engine.close(),
    () => sigil.close(0),
  );
  return { engine, sigil };
}

const chat = (sigil: TestSigil, key = sigil.key, stream = false) =>
  fetch(`${sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'one two three' }], stream }),
  });

const chatWith = (sigil: TestSigil, signal: AbortSignal) =>
  fetch(`${sigil.url}/v1/chat/completions`, {
    method: 'POST',
    signal,
    headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'one two three' }] }),
  });

describe('per-key request rate', () => {
  it('counts down in X-RateLimit headers and answers 429 with Retry-After past the limit, per key', async () => {
    const { engine, sigil } = await setup({ requests_per_minute: 3 });
    const seen = [];
    for (let i = 0; i < 3; i++) {
      const res = await chat(sigil);
      await res.text();
      seen.push([res.status, res.headers.get('x-ratelimit-limit'), res.headers.get('x-ratelimit-remaining')]);
      const reset = Number(res.headers.get('x-ratelimit-reset'));
      expect(reset).toBeGreaterThanOrEqual(1);
      expect(reset).toBeLessThanOrEqual(60);
    }
    expect(seen).toEqual([
      [200, '3', '2'],
      [200, '3', '1'],
      [200, '3', '0'],
    ]);
    const before = engine.requests.length;
    const refused = await chat(sigil);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(await refused.json()).toEqual({
      error: { message: 'Rate limit reached: 3 requests per minute for this API key.', type: 'requests', param: null, code: 'rate_limit_exceeded' },
    });
    expect(engine.requests.length).toBe(before);
    expect((await chat(sigil, sigil.otherKey)).status).toBe(200);
  });
});

describe('per-key token rate', () => {
  it('refuses new requests once the tokens the engine reported reach the limit', async () => {
    const counters = new WatchedCounters();
    const { sigil } = await setup({ tokens_per_minute: 20 }, counters);
    // Each exchange: 3 prompt + 10 completion tokens.
    expect((await (await chat(sigil)).json()).usage.total_tokens).toBe(13);
    expect((await chat(sigil)).status).toBe(200);
    await waitFor('both exchanges charged', () => counters.charged === 26);
    const refused = await chat(sigil);
    expect(refused.status).toBe(429);
    expect((await refused.json()).error.message).toBe('Rate limit reached: 20 tokens per minute for this API key.');
  });
});

describe('concurrency', () => {
  it('allows max_concurrent_per_key streams per key at once and frees the slot when one ends', async () => {
    const counters = new WatchedCounters();
    const { engine, sigil } = await setup({ max_concurrent_per_key: 2 }, counters);
    engine.behaviour = { chunkDelayMs: 30 };
    const a = await chat(sigil, sigil.key, true);
    const b = await chat(sigil, sigil.key, true);
    const c = await chat(sigil, sigil.key, true);
    expect([a.status, b.status, c.status]).toEqual([200, 200, 429]);
    expect(c.headers.get('retry-after')).toBe('1');
    expect((await c.json()).error.message).toBe('Too many concurrent requests for this API key (limit 2).');
    expect((await chat(sigil, sigil.otherKey)).status).toBe(200);
    await a.text();
    await b.text();
    await waitFor('the slots of the two streams and the other key freed', () => counters.released === 3);
    const d = await chat(sigil, sigil.key, true);
    expect(d.status).toBe(200);
    await d.text();
  });

  it('frees the slot of a client that leaves while a slow shared counter is still answering', async () => {
    // A counter store as slow as a distant Redis: acquiring a slot answers only once the client has left.
    const counters = new WatchedCounters(true);
    const { sigil } = await setup({ max_concurrent_per_key: 1 }, counters);
    const controller = new AbortController();
    const leaving = chatWith(sigil, controller.signal).catch(() => 'aborted');
    await waitFor('the slot asked of the counters', () => counters.held.length === 1);
    controller.abort();
    expect(await leaving).toBe('aborted');
    counters.open();
    await waitFor('the slot freed', () => counters.released === 1);
    expect((await chat(sigil)).status).toBe(200);
  });

  it('caps requests in flight overall', async () => {
    const { engine, sigil } = await setup({ max_concurrent: 1 });
    engine.behaviour = { chunkDelayMs: 30 };
    const a = await chat(sigil, sigil.key, true);
    const b = await chat(sigil, sigil.otherKey, true);
    expect(b.status).toBe(429);
    expect((await b.json()).error.message).toBe('This server is at its limit of concurrent requests; retry shortly.');
    await a.text();
  });
});

describe('limits that hold however the timing falls (issue 10)', () => {
  it('max_concurrent cannot be exceeded by two requests that both wait on a slow shared counter', async () => {
    // Before: the overall cap was checked before the await on the counter and counted after it, so both passed.
    const counters = new WatchedCounters(true);
    const { engine, sigil } = await setup({ max_concurrent: 1 }, counters);
    engine.behaviour = { chunkDelayMs: 30 };
    let answered = 0;
    const count = (response: Promise<Response>) => response.finally(() => answered++);
    const both = Promise.all([count(chat(sigil, sigil.key, true)), count(chat(sigil, sigil.otherKey, true))]);
    await waitFor('one request waiting on the counters and the other answered, or both waiting', () => counters.held.length + answered === 2);
    counters.open();
    const [a, b] = await both;
    expect([a.status, b.status].sort()).toEqual([200, 429]);
    await Promise.all([a.text(), b.text()]);
  });

  it("charges a stream's usage to tokens_per_minute even when the usage event arrives split across two reads", async () => {
    const { engine, sigil } = await setup({ tokens_per_minute: 50 });
    const usage =
      'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":40,"total_tokens":60,"completion_tokens":20}}\n\n';
    const cut = usage.indexOf('"completion_tokens"') + 5;
    // Before: the pass-through relay looked for usage with a regex per chunk, and a split event was never charged.
    engine.behaviour = { rawStream: [usage.slice(0, cut), usage.slice(cut), 'data: [DONE]\n\n'], chunkDelayMs: 30 };
    const from = sigil.logs.length;
    expect(await (await chat(sigil, sigil.key, true)).text()).toContain('[DONE]');
    // The tokens are charged when the exchange closes, as its log line is written.
    expect((await requestLines(sigil, from))[0]).toMatchObject({ usage: { prompt_tokens: 40, completion_tokens: 20 } });
    const refused = await chat(sigil);
    expect(refused.status).toBe(429);
    expect((await refused.json()).error.message).toBe('Rate limit reached: 50 tokens per minute for this API key.');
  });
});

describe('header read timeout', () => {
  it('closes a connection whose headers do not arrive within headers_timeout_ms', async () => {
    const { sigil } = await setup({ headers_timeout_ms: 300 });
    const { connect } = await import('node:net');
    const url = new URL(sigil.url);
    const started = Date.now();
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(url.port), url.hostname, () => socket.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n'));
      let text = '';
      socket.on('data', (c) => (text += c));
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
    });
    expect(answer.startsWith('HTTP/1.1 408')).toBe(true);
    expect(Date.now() - started).toBeLessThan(2500);
  });
});

describe('body read timeout', () => {
  it('answers 408 to a client that stops sending its body', async () => {
    const { sigil } = await setup({ body_timeout_ms: 200 });
    const { request } = await import('node:http');
    const url = new URL(sigil.url);
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(
        {
          host: url.hostname,
          port: url.port,
          method: 'POST',
          path: '/v1/chat/completions',
          headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'content-length': '100' },
        },
        (res) => {
          let body = '';
          res.on('data', (c) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        },
      );
      req.on('error', reject);
      req.write('{"model":');
    });
    expect(answer.status).toBe(408);
    expect(JSON.parse(answer.body)).toEqual({
      error: { message: 'The request body did not arrive within 200 ms.', type: 'invalid_request_error', param: null, code: 'request_timeout' },
    });
  });
});
