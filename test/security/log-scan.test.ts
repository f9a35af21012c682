import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { rawRequest } from '../support/raw-http.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { waitFor } from '../support/wait-for.ts';

/**
 * Runs mixed real traffic (JSON, streams, an aborted stream, receipts with nonces, bad requests,
 * engine failures, wrong keys) with a unique marker in every piece of content, then searches every
 * log line Sigil wrote: no prompt, completion, nonce, key, engine credential or client path appears.
 */
const marker = (what: string) => `${what}-${randomBytes(6).toString('hex')}`;
const ENGINE_KEY_ENV = 'SIGIL_LOG_SCAN_ENGINE_KEY';
const ENGINE_KEY = marker('enginekey');

let engine: TestEngine;
let sigil: TestSigil;
/** Everything that must never be logged. */
const secrets: string[] = [ENGINE_KEY];

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m', 'engine/r'] });
  process.env[ENGINE_KEY_ENV] = ENGINE_KEY;
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl, api_key_env: ENGINE_KEY_ENV } },
    models: [
      { id: 'm', upstream: 'e' },
      { id: 'r', upstream: 'e', upstream_model: 'engine/r' },
    ],
    config: { log: { level: 'trace' } },
  });
  secrets.push(sigil.key, sigil.otherKey);
});

afterAll(async () => {
  await sigil.close();
  await engine.close();
  delete process.env[ENGINE_KEY_ENV];
});

async function send(options: { body: string; key?: string; headers?: Record<string, string>; path?: string; method?: string }): Promise<Response> {
  const res = await fetch(`${sigil.url}${options.path ?? '/v1/chat/completions'}`, {
    method: options.method ?? 'POST',
    headers: { authorization: `Bearer ${options.key ?? sigil.key}`, 'content-type': 'application/json', ...options.headers },
    ...(options.method === 'GET' ? {} : { body: options.body }),
  });
  return res;
}

const chatBody = (prompt: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    model: 'm',
    messages: [
      { role: 'system', content: marker('system') },
      { role: 'user', content: prompt },
    ],
    ...extra,
  });

describe('logs after mixed real traffic', () => {
  it('contain one line per request and none of the content, nonces or keys that went through', async () => {
    const prompt = () => {
      const p = marker('prompt');
      secrets.push(p);
      return p;
    };
    const nonce = () => {
      const n = marker('nonce');
      secrets.push(n);
      return n;
    };
    const completion = marker('completion');
    engine.reply = `Sure ${completion} here it is.`;
    secrets.push(completion);
    let requests = 0;
    const done = async (res: Response) => {
      requests++;
      await res.text().catch(() => '');
      return res.status;
    };

    // Served: JSON and streams, plain and with receipts, with and without renaming.
    expect(await done(await send({ body: chatBody(prompt()) }))).toBe(200);
    expect(await done(await send({ body: chatBody(prompt()), headers: { 'x-service-receipt': 'true', 'x-service-nonce': nonce() } }))).toBe(200);
    expect(
      await done(
        await send({
          body: chatBody(prompt(), { stream: true, stream_options: { include_usage: true } }),
          headers: { 'x-service-receipt': 'true', 'x-service-nonce': nonce() },
        }),
      ),
    ).toBe(200);
    expect(await done(await send({ body: JSON.stringify({ model: 'r', messages: [{ role: 'user', content: prompt() }], stream: true }) }))).toBe(200);
    expect(await done(await send({ body: JSON.stringify({ model: 'r', messages: [{ role: 'user', content: prompt() }], region: marker('region') }) }))).toBe(
      200,
    );

    // A stream the client abandons half-way.
    engine.behaviour = { chunkDelayMs: 30 };
    const controller = new AbortController();
    const aborted = await fetch(`${sigil.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
      body: chatBody(prompt(), { stream: true }),
      signal: controller.signal,
    });
    const reader = aborted.body!.getReader();
    await reader.read();
    const gone = engine.nextAbort();
    controller.abort();
    await gone;
    requests++;
    engine.behaviour = {};

    // Engine failures: its 4xx relayed, its 5xx and a broken stream mapped to 502.
    engine.behaviour = { status: 400 };
    expect(await done(await send({ body: chatBody(prompt()) }))).toBe(400);
    engine.behaviour = { status: 503 };
    expect(await done(await send({ body: chatBody(prompt()) }))).toBe(502);
    engine.behaviour = { dropAfterEvents: 2 };
    expect(await done(await send({ body: chatBody(prompt(), { stream: true }) }))).toBe(200);
    engine.behaviour = {};

    // Client mistakes, each carrying content.
    const badJson = `{"model":"m","messages":[{"role":"user","content":"${prompt()}"}`;
    expect(await done(await send({ body: badJson }))).toBe(400);
    const unknownModel = marker('model');
    secrets.push(unknownModel);
    expect(await done(await send({ body: JSON.stringify({ model: unknownModel, messages: [{ role: 'user', content: prompt() }] }) }))).toBe(404);
    expect(await done(await send({ body: chatBody(prompt(), { temperature: 9 }) }))).toBe(400);
    expect(await done(await send({ body: chatBody(prompt()), headers: { 'content-type': 'text/plain' } }))).toBe(415);
    expect(await done(await send({ body: chatBody(prompt()), headers: { 'x-service-nonce': `${nonce()}\u00e9` } }))).toBe(400);
    const pathSecret = marker('path');
    secrets.push(pathSecret);
    expect(await done(await send({ body: '', method: 'GET', path: `/v1/models/${pathSecret}` }))).toBe(404);
    expect(await done(await send({ body: '', method: 'GET', path: `/v1/receipts/${pathSecret}` }))).toBe(404);
    expect(await done(await send({ body: '', method: 'GET', path: `/${pathSecret}?q=${pathSecret}` }))).toBe(404);

    // Wrong keys: a near miss of a real key, a random one, and none.
    const nearMiss = sigil.key.slice(0, -4) + (sigil.key.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    const randomKey = marker('sk-wrong');
    secrets.push(nearMiss, randomKey);
    expect(await done(await send({ body: chatBody(prompt()), key: nearMiss }))).toBe(401);
    expect(await done(await send({ body: chatBody(prompt()), key: randomKey }))).toBe(401);
    expect(await done(await send({ body: '', key: nearMiss, method: 'GET', path: `/v1/receipts/${pathSecret}` }))).toBe(401);
    const noKey = await fetch(`${sigil.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: chatBody(prompt()),
    });
    expect(await done(noKey)).toBe(401);

    // Every request left its line (the close hook logs after the response ends).
    await waitFor('a line for every request', () => sigil.logs.filter((l) => l.includes('"msg":"request"')).length >= requests);
    const requestLines = sigil.logs.filter((l) => l.includes('"msg":"request"'));
    expect(requestLines.length).toBeGreaterThanOrEqual(requests);

    const all = sigil.logs.join('\n');
    expect(all.length).toBeGreaterThan(0);
    // The scan ran at trace: debug lines (pino level 20) were written and are among those searched.
    expect(sigil.logs.filter((l) => (JSON.parse(l) as { level: number }).level <= 20).length).toBeGreaterThanOrEqual(requests);
    // Malformed HTTP carrying content leaves a line too, without the content.
    const smuggled = marker('smuggled');
    secrets.push(smuggled);
    await rawRequest(sigil.url, [
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\nX-${smuggled}: ${smuggled}\r\n\r\n0\r\n\r\n`,
    ]);
    expect(sigil.logs.some((l) => l.includes('"msg":"http rejection"'))).toBe(true);
    const leaked = secrets.filter((s) => sigil.logs.join('\n').includes(s));
    expect(leaked).toEqual([]);
    // Not even a recognisable piece of a key (its random part) or its hash.
    for (const key of [sigil.key, sigil.otherKey, nearMiss]) expect(all).not.toContain(key.slice(-16));
  });
});
