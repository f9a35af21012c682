import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sendChat } from '../../src/trust-page/chat.ts';

/** A loopback server that records the trust page's chat request and refuses it, as a service with no such model would. */
let server: Server;
let received: Record<string, unknown> | undefined;
let receivedHeaders: Record<string, string | string[] | undefined> = {};
let receivedPath: string | undefined;
let base: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    receivedHeaders = req.headers;
    receivedPath = req.url;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"no such model"}}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => server.close());

it("the trust page's chat bounds every answer with max_tokens", async () => {
  const chat = sendChat({
    base,
    apiKey: 'sk-test',
    model: 'demo-tiny-random',
    messages: [{ role: 'user', content: 'Hi' }],
    receipts: { jwks: { keys: [] } },
    onText: () => undefined,
  });
  await expect(chat).rejects.toThrow('no such model');
  expect(received).toEqual({ model: 'demo-tiny-random', messages: [{ role: 'user', content: 'Hi' }], stream: true, max_tokens: 256 });
});

it("the trust page's Messages request is the Messages API's: x-api-key, anthropic-version, max_tokens, and its error message shown", async () => {
  const chat = sendChat({
    api: 'messages',
    base: `${base}/v1`,
    apiKey: 'sk-test',
    model: 'claude-local',
    messages: [{ role: 'user', content: 'Hi' }],
    receipts: { jwks: { keys: [] } },
    onText: () => undefined,
  });
  await expect(chat).rejects.toThrow('no such model');
  expect(receivedPath).toBe('/v1/messages');
  expect(received).toEqual({ model: 'claude-local', max_tokens: 256, messages: [{ role: 'user', content: 'Hi' }], stream: true });
  expect(receivedHeaders['x-api-key']).toBe('sk-test');
  expect(receivedHeaders['anthropic-version']).toBe('2023-06-01');
  expect(receivedHeaders.authorization).toBeUndefined();
  expect(receivedHeaders['x-service-receipt']).toBe('true');
});

it('the trust page names its icon inline, so browsers do not ask for /favicon.ico', () => {
  const html = readFileSync(new URL('../../src/trust-page/index.html', import.meta.url), 'utf8');
  expect(html).toMatch(/<link rel="icon" href="data:," ?\/?>/);
});

it("the trust page's chat shows each delta of a stream ended by bare CRs, and refuses an event that never ends within the cap", async () => {
  const big = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: {"choices":[{"delta":{"content":"Hel"}}]}\r\rdata: {"choices":[{"delta":{"content":"lo"}}]}\r\r');
    // One event that never ends: past the 8 MiB a client accepts.
    const line = 'x'.repeat(1024 * 1024);
    for (let i = 0; i <= 8; i++) res.write(line);
    res.end();
  });
  await new Promise<void>((resolve) => big.listen(0, '127.0.0.1', resolve));
  try {
    const deltas: string[] = [];
    const chat = sendChat({
      base: `http://127.0.0.1:${(big.address() as AddressInfo).port}`,
      apiKey: 'sk-test',
      model: 'demo-tiny-random',
      messages: [{ role: 'user', content: 'Hi' }],
      receipts: { jwks: { keys: [] } },
      onText: (text) => deltas.push(text),
    });
    await expect(chat).rejects.toThrow('the service sent a stream event larger than 8388608 bytes');
    expect(deltas).toEqual(['Hel', 'lo']);
  } finally {
    await new Promise<void>((resolve) => big.close(() => resolve()));
  }
});

it("the trust page's Messages chat shows each text delta and stops at the stream's error event with its message", async () => {
  const failing = createServer((_req, res) => {
    const event = (type: string, body: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...body })}\n\n`;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }));
    res.write(event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Hel' } }));
    res.write(event('ping', {}));
    res.write(event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'lo' } }));
    res.end(event('error', { error: { type: 'overloaded_error', message: 'The engine is overloaded.' } }));
  });
  await new Promise<void>((resolve) => failing.listen(0, '127.0.0.1', resolve));
  try {
    const deltas: string[] = [];
    const chat = sendChat({
      api: 'messages',
      base: `http://127.0.0.1:${(failing.address() as AddressInfo).port}`,
      apiKey: 'sk-test',
      model: 'claude-local',
      messages: [{ role: 'user', content: 'Hi' }],
      receipts: { jwks: { keys: [] } },
      onText: (text) => deltas.push(text),
    });
    await expect(chat).rejects.toThrow('The engine is overloaded.');
    expect(deltas).toEqual(['Hel', 'lo']);
  } finally {
    await new Promise<void>((resolve) => failing.close(() => resolve()));
  }
});
