import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build } from 'esbuild';
import { launchChromium, SKIP_BROWSER_TESTS } from '../../support/chromium.ts';
import { startTestEngine, type TestEngine } from '../../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../../support/sigil.ts';

// The official Anthropic and OpenAI SDKs running in chromium on another origin than Sigil's: the preflights it causes are what a real browser sends.

/** The page's script: the SDK as a browser app bundles it, one JSON message and one stream, their texts (or the error) left on `window`. */
const APP = `
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
window.askSigil = async (baseURL, apiKey, model) => {
  const client = new Anthropic({ baseURL, apiKey, dangerouslyAllowBrowser: true, maxRetries: 0 });
  try {
    const message = await client.messages.create({ model, max_tokens: 32, messages: [{ role: 'user', content: 'hello from a browser' }] });
    const streamed = await client.messages.stream({ model, max_tokens: 32, messages: [{ role: 'user', content: 'stream it' }] }).finalMessage();
    return { json: message.content, stream: streamed.content, requestId: message._request_id ?? null };
  } catch (err) {
    return { error: String(err) };
  }
};
window.chatWithSigil = async (baseURL, apiKey, model) => {
  const client = new OpenAI({ baseURL: baseURL + '/v1', apiKey, dangerouslyAllowBrowser: true, maxRetries: 0 });
  try {
    const completion = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hello from a browser' }] });
    let streamed = '';
    const stream = await client.chat.completions.create({ model, stream: true, messages: [{ role: 'user', content: 'stream it' }] });
    for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? '';
    return { json: completion.choices[0].message.content, stream: streamed };
  } catch (err) {
    return { error: String(err) };
  }
};
`;

let engine: TestEngine;
let sigil: TestSigil;
let app: Server;
let appOrigin: string;
let browser: Browser;

beforeAll(async () => {
  const bundle = await build({
    stdin: { contents: APP, resolveDir: fileURLToPath(new URL('../../..', import.meta.url)), loader: 'js' },
    bundle: true,
    format: 'esm',
    platform: 'browser',
    write: false,
    logLevel: 'warning',
  });
  const script = bundle.outputFiles[0]!.contents;
  app = createServer((req, res) => {
    if (req.url === '/app.js') return void res.writeHead(200, { 'content-type': 'text/javascript' }).end(script);
    res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><link rel="icon" href="data:,"><script type="module" src="/app.js"></script>');
  });
  await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
  appOrigin = `http://127.0.0.1:${(app.address() as AddressInfo).port}`;
  engine = await startTestEngine({ modelNames: ['claude-local'] });
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'claude-local', endpoints: ['chat', 'messages'] }],
    config: { cors: { allowed_origins: [appOrigin] } },
  });
  browser = await launchChromium();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await sigil?.close(0);
  await engine?.close();
  app?.close();
});

describe.skipIf(SKIP_BROWSER_TESTS)('a browser app on an allowed origin using the official SDKs', () => {
  it('gets its JSON message and its stream from /v1/messages, and reads the request-id header', async () => {
    const page = await browser.newPage();
    try {
      await page.goto(`${appOrigin}/`, { waitUntil: 'load' });
      await page.waitForFunction(() => 'askSigil' in window, { timeout: 20_000 });
      const answer = await page.evaluate(
        (base, key) => (window as unknown as { askSigil: (b: string, k: string, m: string) => Promise<unknown> }).askSigil(base, key, 'claude-local'),
        sigil.url,
        sigil.key,
      );
      expect(answer).toEqual({
        json: [{ type: 'text', text: engine.reply }],
        stream: [{ type: 'text', text: engine.reply }],
        requestId: expect.stringMatching(/^[0-9a-f]{16}$/),
      });
      const sent = engine.requests.filter((r) => r.path === '/v1/messages').map((r) => JSON.parse(r.body.toString('utf8')).messages[0].content);
      expect(sent).toEqual(['hello from a browser', 'stream it']);
    } finally {
      await page.close();
    }
  });

  it('gets its chat completion and its stream from openai', async () => {
    const page = await browser.newPage();
    try {
      await page.goto(`${appOrigin}/`, { waitUntil: 'load' });
      await page.waitForFunction(() => 'chatWithSigil' in window, { timeout: 20_000 });
      const answer = await page.evaluate(
        (base, key) => (window as unknown as { chatWithSigil: (b: string, k: string, m: string) => Promise<unknown> }).chatWithSigil(base, key, 'claude-local'),
        sigil.url,
        sigil.key,
      );
      expect(answer).toEqual({ json: engine.reply, stream: engine.reply });
    } finally {
      await page.close();
    }
  });
});
