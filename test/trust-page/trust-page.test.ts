import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeyPairSync } from 'node:crypto';
import { launchChromium, SHOTS, SKIP_BROWSER_TESTS } from '../support/chromium.ts';
import { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

// The trust page in a real browser (Debian's chromium), against a running Sigil: what a person sees.

let pageDir: string;
let engine: TestEngine;
let sigil: TestSigil;
let browser: Browser;

beforeAll(async () => {
  pageDir = mkdtempSync(join(tmpdir(), 'sigil-trust-page-'));
  execFileSync(process.execPath, [new URL('../../scripts/build-trust-page.mjs', import.meta.url).pathname, pageDir]);
  engine = await startTestEngine({ modelNames: ['chat-model', 'embed-model'] });
  sigil = await startTestSigil({
    upstreams: { main: { url: engine.baseUrl } },
    models: [
      { id: 'chat-model', context_window: 8192, reasoning: false },
      { id: 'embed-model', endpoints: ['embeddings'] },
    ],
    config: { trust_page: { dir: pageDir } },
  });
  browser = await launchChromium();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await sigil?.close();
  await engine?.close();
});

/** Opens the page, which checks its own service at once; another service is typed in, chosen explicitly and checked. */
async function verifyIn(page: Page, url: string, otherServiceUrl?: string): Promise<string> {
  await page.goto(url, { waitUntil: 'load' });
  if (otherServiceUrl !== undefined) {
    await retype(page, '#service-url', otherServiceUrl);
    await page.click('#allow-other-service');
    await page.click('#verify-button');
  }
  await page.waitForFunction(() => (document.getElementById('verdict')?.textContent ?? '') !== '', { timeout: 20_000 });
  return page.$eval('#verdict', (e) => e.textContent ?? '');
}

/** Replaces a field's text the way a person does: select it all, type over it. */
async function retype(page: Page, selector: string, text: string): Promise<void> {
  await page.click(selector, { count: 3 });
  await page.keyboard.press('Backspace');
  await page.type(selector, text);
}

/**
 * A service on another loopback port that passes every GET through to the real Sigil (so it verifies like it),
 * allows any origin, and records every Authorization header it is sent; a chat request gets 401.
 */
async function startAttacker(): Promise<{ url: string; authorizations: string[]; close: () => void }> {
  const authorizations: string[] = [];
  const server: Server = createServer(async (req, res) => {
    if (req.headers.authorization !== undefined) authorizations.push(req.headers.authorization);
    const cors = {
      'access-control-allow-origin': '*',
      'access-control-allow-headers': req.headers['access-control-request-headers'] ?? '*',
      'access-control-allow-methods': 'GET, POST',
    };
    if (req.method === 'OPTIONS') return void res.writeHead(204, cors).end();
    if (req.method !== 'GET') return void res.writeHead(401, { ...cors, 'content-type': 'application/json' }).end('{"error":{"message":"no"}}');
    const upstream = await fetch(`${sigil.url}${req.url}`);
    res
      .writeHead(upstream.status, { ...cors, 'content-type': upstream.headers.get('content-type') ?? 'application/json' })
      .end(Buffer.from(await upstream.arrayBuffer()));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, authorizations, close: () => server.close() };
}

/** Does what the page lets a person do: if a chat box is offered, types the key and a message and sends it. */
async function chatIfOffered(page: Page): Promise<void> {
  if (await page.$eval('#chat-panel', (e) => (e as HTMLElement).hidden)) return;
  await page.type('#api-key', sigil.key);
  await page.type('#chat-message', 'my secret');
  await page.click('#chat-send');
  await page.waitForFunction(() => (document.querySelector('.message.assistant .content')?.textContent ?? '') !== '', { timeout: 20_000 });
}

async function checkStatuses(page: Page): Promise<Record<string, string>> {
  return page.$$eval('#checks li', (items) =>
    Object.fromEntries(
      items.map((li) => [(li.querySelector('.check-detail')?.textContent ?? '').split(':')[0]!, li.querySelector('.status')?.textContent ?? '']),
    ),
  );
}

async function shot(page: Page, name: string): Promise<void> {
  const path = join(SHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  console.log(`screenshot: ${path}`);
}

describe.skipIf(SKIP_BROWSER_TESTS)('the trust page in chromium', () => {
  it('GET / serves the page with a strict content security policy', async () => {
    const res = await fetch(`${sigil.url}/`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(await res.text()).toContain('<label for="service-url">');
    expect((await fetch(`${sigil.url}/trust/app.js`)).headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect((await fetch(`${sigil.url}/trust/../package.json`)).status).toBe(404);
  });

  it('says plainly that a development service (tee none) has no confidential hardware, and shows the models', async () => {
    const page = await browser.newPage();
    try {
      const verdict = await verifyIn(page, `${sigil.url}/`);
      await shot(page, 'development-service');
      expect(verdict).toBe('Development service: no confidential hardware. Do not send anything private.');
      const statuses = await checkStatuses(page);
      // The names and marks `sigil verify` prints for the same service: one verifier core.
      expect(statuses).toEqual({
        'attestation.tls_key': 'WAIVED',
        'attestation.hpke_key': 'PASS',
        'attestation.ohttp_key': 'PASS',
        'attestation.tee': 'WAIVED',
        'attestation.nonce': 'PASS',
        'attestation.report_data': 'PASS',
        'attestation.jwks': 'PASS',
        'attestation.manifest': 'WAIVED',
        'gpu.evidence': 'PASS',
        'attestation.policy': 'PASS',
      });
      // The verdict `sigil verify --allow-no-tee` gives the same service, in the same words.
      expect(await page.$eval('#verdict-detail', (e) => e.textContent ?? '')).toMatch(
        /verified with waivers: 7 checks passed; 3 waived \(attestation\.tls_key, attestation\.tee, attestation\.manifest\)\.$/,
      );
      // No model here serves Anthropic's Messages API: the chat offers chat completions only.
      expect(await page.$eval('#chat-api option[value="messages"]', (o) => (o as HTMLOptionElement).disabled)).toBe(true);
      const rows = await page.$$eval('#models tbody tr', (trs) => trs.map((tr) => Array.from(tr.querySelectorAll('td'), (td) => td.textContent)));
      expect(rows).toEqual([
        ['chat-model', 'test-provider', '8,192', 'no', '0.5 / 1.5 USD', 'eu-west', 'chat, completions, responses'],
        ['embed-model', 'test-provider', '131,072', 'yes', '0.5 / 1.5 USD', 'eu-west', 'embeddings'],
      ]);
    } finally {
      await page.close();
    }
  });

  it('checks its own service as soon as it loads, without a button press', async () => {
    const page = await browser.newPage();
    try {
      await page.goto(`${sigil.url}/`, { waitUntil: 'load' });
      await page.waitForFunction(() => (document.getElementById('verdict')?.textContent ?? '') !== '', { timeout: 15_000 });
      expect(await page.$eval('#verdict', (e) => e.textContent)).toBe('Development service: no confidential hardware. Do not send anything private.');
      expect(await page.$eval('#service-url', (e) => (e as HTMLInputElement).value)).toBe(sigil.url);
      expect(await page.$eval('#other-service', (e) => (e as HTMLElement).hidden)).toBe(true);
    } finally {
      await page.close();
    }
  });

  it("never sends the API key to another service a ?url= link names, and checks it only on the user's explicit choice", async () => {
    const attacker = await startAttacker();
    const page = await browser.newPage();
    try {
      await page.goto(`${sigil.url}/?url=${encodeURIComponent(attacker.url)}`, { waitUntil: 'load' });
      await page.click('#verify-button');
      await page.waitForFunction(
        () =>
          (document.getElementById('verdict')?.textContent ?? '') !== '' ||
          (document.getElementById('other-service-text')?.textContent ?? '').endsWith('Tick the box to check it.'),
        { timeout: 20_000 },
      );
      await chatIfOffered(page);
      await shot(page, 'other-service-link');
      expect(attacker.authorizations).toEqual([]);
      expect(await page.$eval('#other-service-text', (e) => e.textContent)).toBe(
        `${attacker.url} is another service than ${sigil.url}, which served this page. It is checked, and your API key sent to it, only if you choose so below. Tick the box to check it.`,
      );
      expect(await page.$eval('#verdict', (e) => e.textContent)).toBe('');
      expect(await page.$eval('#chat-panel', (e) => (e as HTMLElement).hidden)).toBe(true);
    } finally {
      await page.close();
      attacker.close();
    }
  });

  it('forgets the verdict and closes the chat when the service URL is edited after verifying', async () => {
    const attacker = await startAttacker();
    const page = await browser.newPage();
    try {
      await page.goto(`${sigil.url}/`, { waitUntil: 'load' });
      // Clicked for pages that do not check on load; one that does checks again.
      await page.click('#verify-button');
      await page.waitForFunction(() => (document.getElementById('verdict')?.textContent ?? '') !== '', { timeout: 20_000 });
      expect(await page.$eval('#chat-panel', (e) => (e as HTMLElement).hidden)).toBe(false);
      await retype(page, '#service-url', attacker.url);
      await chatIfOffered(page);
      expect(attacker.authorizations).toEqual([]);
      expect(await page.$eval('#verdict', (e) => e.textContent)).toBe('');
      expect(await page.$eval('#chat-panel', (e) => (e as HTMLElement).hidden)).toBe(true);
      expect(await page.$eval('#other-service', (e) => (e as HTMLElement).hidden)).toBe(false);
    } finally {
      await page.close();
      attacker.close();
    }
  });

  it("reads pasted reference values with the verifier's own reader, naming a key it does not know", async () => {
    const page = await browser.newPage();
    try {
      await page.goto(`${sigil.url}/`, { waitUntil: 'load' });
      await page.$eval('#reference', (area) => ((area as HTMLTextAreaElement).value = 'tdx:\n  rtmr9: ["aa"]\n'));
      await page.click('#verify-button');
      await page.waitForFunction(() => (document.getElementById('verdict')?.textContent ?? '') !== '', { timeout: 20_000 });
      expect(await page.$eval('#verdict', (e) => e.textContent)).toBe('Not verified: at least one check failed.');
      const details = await page.$$eval('#checks li .check-detail', (items) => items.map((i) => i.textContent ?? ''));
      expect(details.join('\n')).toContain('tdx.rtmr9: unknown key');
    } finally {
      await page.close();
    }
  });

  it('shows a service whose JWKS does not match its attested binding as failed', async () => {
    // A hostile front: everything passes through, except the JWKS, which names another key.
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const foreign = { keys: [{ ...publicKey.export({ format: 'jwk' }), kid: 'intruder', use: 'sig', alg: 'ES256' }] };
    const front: Server = createServer(async (req, res) => {
      const headers = { 'access-control-allow-origin': '*', 'content-type': 'application/json' };
      if (req.url === '/v1/verify/jwks.json') return void res.writeHead(200, headers).end(JSON.stringify(foreign));
      const upstream = await fetch(`${sigil.url}${req.url}`);
      res
        .writeHead(upstream.status, { ...headers, 'content-type': upstream.headers.get('content-type') ?? 'application/json' })
        .end(Buffer.from(await upstream.arrayBuffer()));
    });
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', () => resolve()));
    const frontUrl = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
    const page = await browser.newPage();
    try {
      // The page itself comes from the real service; it is pointed at the hostile front (another origin).
      const verdict = await verifyIn(page, `${sigil.url}/`, frontUrl);
      await shot(page, 'jwks-mismatch');
      expect(verdict).toBe('Not verified: at least one check failed.');
      expect((await checkStatuses(page))['attestation.jwks']).toBe('FAIL');
    } finally {
      await page.close();
      front.close();
    }
  });

  it("chats with the service and shows each reply's receipt verified over the bytes the page sent and received", async () => {
    const page = await browser.newPage();
    try {
      await verifyIn(page, `${sigil.url}/`);
      await page.type('#api-key', sigil.key);
      await page.select('#chat-model', 'chat-model');
      await page.type('#chat-message', 'Hello there');
      await page.click('#chat-send');
      await page.waitForSelector('#receipts li', { timeout: 20_000 });
      await shot(page, 'chat-receipt');
      expect(await page.$eval('.message.assistant .content', (e) => e.textContent)).toBe(engine.reply);
      const receipt = await page.$eval('#receipts li', (li) => li.textContent ?? '');
      // The service is a development one (tee "none"): the page waives receipt.tee, the one waiver, and says so.
      expect(receipt.startsWith('Receipt verified with waivers ')).toBe(true);
      // Sigil offers EHBP by default: the page sealed the message to the attested key and opened the answer.
      expect(receipt).toContain('encrypted (EHBP)');
      expect(engine.requests.at(-1)?.body.toString('utf8')).toContain('Hello there');
      const lines = await page.$$eval('#receipts li .checks li', (items) =>
        items.map((li) => `${li.querySelector('.status')?.textContent} ${(li.querySelector('.check-detail')?.textContent ?? '').split(':')[0]}`),
      );
      expect(lines).toEqual(
        expect.arrayContaining(['PASS receipt.signature', 'PASS receipt.request_hash', 'PASS receipt.response_hash', 'PASS receipt.nonce']),
      );
      // A development service has no hardware: its receipts' tee is waived, never passed; the model is one the policy allows.
      expect(lines).toEqual([
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
      // The receipt checks share one title and sentence: shown once, not on each of their rows.
      const titles = await page.$$eval('#receipts li .checks .check-title', (items) => items.map((e) => e.textContent));
      expect(titles.filter((t) => t === 'Receipt')).toHaveLength(1);
      const whys = await page.$$eval('#receipts li .checks .check-why', (items) => items.map((e) => e.textContent));
      expect(new Set(whys).size).toBe(whys.length);
      // The key was typed into the page only: never in a log line.
      expect(sigil.logs.some((line) => line.includes(sigil.key))).toBe(false);
    } finally {
      await page.close();
    }
  });
});
