import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, SHOTS, SKIP_BROWSER_TESTS } from '../support/chromium.ts';
import { startForgingProxy, type ForgingProxy } from '../support/forging-proxy.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type CatalogueModelSpec, type TestSigil } from '../support/sigil.ts';

// Issue 50 on the trust page: a Messages exchange sent from the page in chromium, its receipt verified there.

let pageDir: string;
let engine: TestEngine;
let sigil: TestSigil;
let browser: Browser;

const MODELS: CatalogueModelSpec[] = [
  { id: 'chat-model', endpoints: ['chat'] },
  { id: 'claude-local', endpoints: ['chat', 'messages'] },
];

beforeAll(async () => {
  pageDir = mkdtempSync(join(tmpdir(), 'sigil-trust-page-'));
  execFileSync(process.execPath, [new URL('../../scripts/build-trust-page.mjs', import.meta.url).pathname, pageDir]);
  engine = await startTestEngine({ modelNames: ['chat-model', 'claude-local'] });
  sigil = await startTestSigil({ upstreams: { main: { url: engine.baseUrl } }, models: MODELS, config: { trust_page: { dir: pageDir } } });
  browser = await launchChromium();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await sigil?.close();
  await engine?.close();
});

/** Opens the page, which checks its own service at once, and waits for the verdict. */
async function openVerified(page: Page, url: string): Promise<void> {
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForFunction(() => (document.getElementById('verdict')?.textContent ?? '') !== '', { timeout: 20_000 });
}

/** Chooses the Messages API, types the key and a message, sends it, and waits for its receipt line. */
async function sendMessage(page: Page, key: string, text: string): Promise<void> {
  await page.select('#chat-api', 'messages');
  await page.type('#api-key', key);
  await page.type('#chat-message', text);
  await page.click('#chat-send');
  await page.waitForFunction(
    () =>
      document.querySelector('#receipts li') !== null ||
      (document.querySelector('.message.assistant .content')?.textContent ?? '').startsWith('The request failed'),
    { timeout: 20_000 },
  );
}

async function receiptLines(page: Page): Promise<string[]> {
  return page.$$eval('#receipts li .checks li', (items) =>
    items.map((li) => `${li.querySelector('.status')?.textContent} ${(li.querySelector('.check-detail')?.textContent ?? '').split(':')[0]}`),
  );
}

async function shot(page: Page, name: string): Promise<void> {
  const path = join(SHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  console.log(`screenshot: ${path}`);
}

describe.skipIf(SKIP_BROWSER_TESTS)("the trust page's chat over Anthropic's Messages API", () => {
  it('offers only the models that serve the API chosen', async () => {
    const page = await browser.newPage();
    try {
      await openVerified(page, `${sigil.url}/`);
      const apis = await page.$$eval('#chat-api option', (options) => options.map((o) => `${(o as HTMLOptionElement).value}: ${o.textContent}`));
      expect(apis).toEqual(['chat: Chat Completions (/v1/chat/completions)', "messages: Messages, Anthropic's API (/v1/messages)"]);
      const models = () => page.$$eval('#chat-model option', (options) => options.map((o) => (o as HTMLOptionElement).value));
      expect(await page.$eval('#chat-api option[value="messages"]', (o) => (o as HTMLOptionElement).disabled)).toBe(false);
      expect(await models()).toEqual(['chat-model', 'claude-local']);
      await page.select('#chat-api', 'messages');
      expect(await models()).toEqual(['claude-local']);
    } finally {
      await page.close();
    }
  });

  it('sends a Messages exchange, shows the answer, and verifies the receipt after message_stop over the exact bytes', async () => {
    const page = await browser.newPage();
    try {
      await openVerified(page, `${sigil.url}/`);
      await sendMessage(page, sigil.key, 'Hello Messages');
      await shot(page, 'messages-receipt');
      expect(await page.$eval('.message.assistant .content', (e) => e.textContent)).toBe(engine.reply);
      const sent = engine.requests.at(-1)!;
      expect(sent.path).toBe('/v1/messages');
      expect(JSON.parse(sent.body.toString('utf8'))).toEqual({
        model: 'claude-local',
        max_tokens: 256,
        messages: [{ role: 'user', content: 'Hello Messages' }],
        stream: true,
      });
      const receipt = await page.$eval('#receipts li', (li) => li.textContent ?? '');
      expect(receipt.startsWith('Receipt verified with waivers ')).toBe(true);
      expect(receipt).toContain('encrypted (EHBP)');
      expect(await page.$eval('#receipts li .receipt-endpoint', (e) => e.textContent)).toBe(
        'This answer came from /v1/messages: the endpoint the signed receipt names.',
      );
      expect(await receiptLines(page)).toEqual([
        'PASS receipt.jwks',
        'PASS receipt.signature',
        'PASS receipt.claims',
        'PASS receipt.schema_version',
        'PASS receipt.receipt_type',
        'PASS receipt.nonce',
        'PASS receipt.measurement',
        'PASS receipt.policy_hash',
        'PASS receipt.endpoint',
        'PASS receipt.model',
        'PASS receipt.request_hash',
        'PASS receipt.response_hash',
        'PASS receipt.issued_at',
        'WAIVED receipt.tee',
        'PASS policy.model',
      ]);
      expect(sigil.logs.some((line) => line.includes(sigil.key))).toBe(false);
    } finally {
      await page.close();
    }
  });
});

describe.skipIf(SKIP_BROWSER_TESTS)("another service that lists the page's origin in cors.allowed_origins", () => {
  let other: TestSigil;
  beforeAll(async () => {
    other = await startTestSigil({ upstreams: { main: { url: engine.baseUrl } }, models: MODELS, config: { cors: { allowed_origins: [sigil.url] } } });
  });
  afterAll(async () => {
    await other?.close();
  });

  it('answers the page a sealed Messages exchange across origins, its receipt verified', async () => {
    const page = await browser.newPage();
    try {
      await openVerified(page, `${sigil.url}/`);
      await page.click('#service-url', { count: 3 });
      await page.keyboard.press('Backspace');
      await page.type('#service-url', other.url);
      await page.click('#allow-other-service');
      await page.click('#verify-button');
      await page.waitForFunction(() => (document.getElementById('verdict')?.textContent ?? '') !== '', { timeout: 20_000 });
      await sendMessage(page, other.key, 'Hello across origins');
      await shot(page, 'messages-receipt-other-origin');
      expect(await page.$eval('.message.assistant .content', (e) => e.textContent)).toBe(engine.reply);
      const receipt = await page.$eval('#receipts li', (li) => li.textContent ?? '');
      expect(receipt.startsWith('Receipt verified with waivers ')).toBe(true);
      expect(receipt).toContain('encrypted (EHBP)');
      expect(await page.$eval('#receipts li .receipt-endpoint', (e) => e.textContent)).toBe(
        'This answer came from /v1/messages: the endpoint the signed receipt names.',
      );
    } finally {
      await page.close();
    }
  });
});

describe.skipIf(SKIP_BROWSER_TESTS)('a Messages answer changed on the way', () => {
  let plain: TestSigil;
  let relay: ForgingProxy;
  beforeAll(async () => {
    // Unsealed bodies, so a relay on the path can change the answer's text (a sealed one it can only break).
    plain = await startTestSigil({
      upstreams: { main: { url: engine.baseUrl } },
      models: MODELS,
      config: { trust_page: { dir: pageDir }, ehbp: { enabled: false } },
    });
    relay = await startForgingProxy(plain.url);
    relay.rewrite = (method, path) =>
      method === 'POST' && path === '/v1/messages' ? (body) => Buffer.from(body.toString('utf8').replace('"Hello ', '"Howdy ')) : undefined;
  });
  afterAll(async () => {
    await relay?.close();
    await plain?.close();
  });

  it('shows the receipt as failed, its response hash the check that failed, and no endpoint vouched for', async () => {
    const page = await browser.newPage();
    try {
      // The page comes through the relay too: its own service is the relay's origin.
      await openVerified(page, `${relay.url}/`);
      await sendMessage(page, plain.key, 'Hello Messages');
      await shot(page, 'messages-receipt-tampered');
      expect(await page.$eval('.message.assistant .content', (e) => e.textContent)).toBe(engine.reply.replace('Hello', 'Howdy'));
      const receipt = await page.$eval('#receipts li', (li) => li.textContent ?? '');
      expect(receipt.startsWith('Receipt NOT verified ')).toBe(true);
      expect(receipt).toContain('not encrypted');
      expect(await page.$eval('#receipts li .receipt-endpoint', (e) => e.textContent)).toBe(
        'The receipt did not verify: nothing vouches for which endpoint answered.',
      );
      const failed = (await receiptLines(page)).filter((line) => line.startsWith('FAIL '));
      expect(failed).toEqual(['FAIL receipt.response_hash']);
    } finally {
      await page.close();
    }
  });
});
