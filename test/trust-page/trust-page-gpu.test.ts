import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import koffi from 'koffi';
import { launchChromium, SHOTS, SKIP_BROWSER_TESTS } from '../support/chromium.ts';
import { type Browser, type ElementHandle, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { START_NONCE } from '../../src/protocol/attestation.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { NVIDIA_VECTORS, realChainPem, realReport, VECTOR_NONCE } from '../support/gpu-fixtures.ts';

// The trust page in Debian's chromium against a Sigil whose GPU evidence comes through NVML: the stand-in
// libnvidia-ml of test/support/fake-nvml answers the real H100 report and chain of test/vectors/nvidia.
const FAKE_NVML = join(import.meta.dirname, '..', 'support', 'fake-nvml', 'fake-nvml.c');
/** Offset of a byte inside the first measurement value of the real report (request 37, header 8, block header 7). */
const MEASUREMENT_BYTE = 37 + 8 + 7 + 5;

let dir: string;
let engine: TestEngine;
let sigil: TestSigil;
/** A second service for the tampered report: Sigil keeps each nonce's document, and the page's nonce is always the recorded one. */
let other: TestSigil;
let browser: Browser;
/** What every stand-in GPU answers from now on (the library is loaded once per process: Sigil's NVML binding shares it). */
let answer: (report: Uint8Array) => void;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sigil-trust-page-gpu-'));
  const library = join(dir, 'libnvidia-ml.so.1');
  execFileSync('gcc', ['-shared', '-fPIC', '-Wall', '-Werror', '-o', library, FAKE_NVML]);
  writeFileSync(join(dir, 'chain.pem'), realChainPem());
  const configure = koffi.load(library).func('int fakeNvmlConfigure(const char *report, const char *certs, uint32_t gpus, uint32_t cc)');
  answer = (report) => {
    writeFileSync(join(dir, 'report.bin'), report);
    expect(configure(join(dir, 'report.bin'), join(dir, 'chain.pem'), 1, 1)).toBe(0);
  };
  // A recorded report cannot sign another nonce, and Sigil refuses a GPU answer for another nonce than it asked: for
  // the start evidence (START_NONCE) the stand-in answers a copy carrying that nonce (its signature no longer holds;
  // nothing here verifies the start evidence). Every fresh document after that holds the real, signed report.
  const forStart = Buffer.from(realReport());
  forStart.set(START_NONCE, 4);
  answer(forStart);
  const pageDir = join(dir, 'page');
  execFileSync(process.execPath, [new URL('../../scripts/build-trust-page.mjs', import.meta.url).pathname, pageDir]);
  engine = await startTestEngine({ modelNames: ['chat-model'] });
  const start = () =>
    startTestSigil({
      upstreams: { main: { url: engine.baseUrl } },
      models: [{ id: 'chat-model' }],
      // auto, not required: required verifies every report it collects, and this start report's signature no longer holds.
      config: { trust_page: { dir: pageDir }, attestation: { provider: 'none', gpu: 'auto', nvml_library: library } },
    });
  sigil = await start();
  other = await start();
  answer(realReport());
  browser = await launchChromium();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await sigil?.close();
  await other?.close();
  await engine?.close();
});

/**
 * Opens the page and verifies. The recorded report signed one nonce only, so the page's random nonce is made that one:
 * the first 32 random bytes the page draws after loading (its verification nonce) are the recorded report's.
 */
async function verifyWithRecordedNonce(page: Page, prepare?: (page: Page) => Promise<void>, service: TestSigil = sigil): Promise<string> {
  await page.goto(`${service.url}/`, { waitUntil: 'load' });
  await page.evaluate((nonceHex) => {
    const original = crypto.getRandomValues.bind(crypto);
    let used = false;
    crypto.getRandomValues = (<T extends ArrayBufferView | null>(array: T): T => {
      if (!used && array instanceof Uint8Array && array.length === 32) {
        used = true;
        array.set(nonceHex.match(/../g)!.map((h) => parseInt(h, 16)));
        return array;
      }
      return original(array as never) as T;
    }) as typeof crypto.getRandomValues;
  }, VECTOR_NONCE);
  await prepare?.(page);
  await page.click('#verify-button');
  await page.waitForFunction(() => (document.getElementById('verdict')?.textContent ?? '') !== '', { timeout: 30_000 });
  return page.$eval('#verdict', (e) => e.textContent ?? '');
}

async function checkLines(page: Page): Promise<Record<string, { status: string; title: string; detail: string }>> {
  return page.$$eval('#checks li', (items) =>
    Object.fromEntries(
      items.map((li) => {
        const text = li.querySelector('.check-detail')?.textContent ?? '';
        const at = text.indexOf(': ');
        return [
          text.slice(0, at),
          { status: li.querySelector('.status')?.textContent ?? '', title: li.querySelector('.check-title')?.textContent ?? '', detail: text.slice(at + 2) },
        ];
      }),
    ),
  );
}

async function shot(page: Page, name: string): Promise<void> {
  const path = join(SHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  console.log(`screenshot: ${path}`);
}

const statuses = (lines: Awaited<ReturnType<typeof checkLines>>) =>
  Object.fromEntries(
    Object.entries(lines)
      .filter(([name]) => name.startsWith('gpu'))
      .map(([name, l]) => [name, l.status]),
  );

describe.skipIf(SKIP_BROWSER_TESTS)('the trust page verifies GPU evidence in chromium', () => {
  it("passes the H100's report: signed by the GPU, chained to NVIDIA's root, its FWID and the page's nonce; measurements not compared", async () => {
    answer(realReport());
    const page = await browser.newPage();
    try {
      const verdict = await verifyWithRecordedNonce(page);
      await shot(page, 'gpu-evidence-verified');
      // tee "none": the CPU side is a development service, whatever the GPU says.
      expect(verdict).toBe('Development service: no confidential hardware. Do not send anything private.');
      const lines = await checkLines(page);
      expect(statuses(lines)).toEqual({
        'gpu.binding': 'PASS',
        'gpu[0].report': 'PASS',
        'gpu[0].certificates': 'PASS',
        'gpu[0].signature': 'PASS',
        'gpu[0].chain': 'PASS',
        'gpu[0].root': 'PASS',
        'gpu[0].fwid': 'PASS',
        'gpu[0].nonce': 'PASS',
        'gpu[0].measurements': 'NOT PINNED',
        'gpu[0].revocation': 'NOT PINNED',
      });
      expect(lines['attestation.nonce']?.status).toBe('PASS');
      expect(lines['attestation.report_data']?.status).toBe('PASS');
      expect(lines['gpu[0].signature']).toEqual({
        status: 'PASS',
        title: 'GPU evidence',
        detail:
          "the GPU's key (GH100 A01 GSP FMC LF) signed the request and its answer (ECDSA P-384, SHA-384 over 4021 bytes): the measurements are the GPU's own",
      });
      expect(lines['gpu[0].root']?.detail).toBe(
        'the chain ends at NVIDIA Device Identity CA, byte for byte a trusted NVIDIA device root: a genuine NVIDIA GPU made this report',
      );
      expect(lines['gpu[0].nonce']?.detail).toBe(
        `the signed request carries your nonce ${VECTOR_NONCE}: the report was made for this verification, not replayed`,
      );
      expect(lines['gpu[0].measurements']?.detail).toBe(
        'NOT PINNED: no RIMs given (reference values gpu.rims): the measurements of driver 550.90.07 and VBIOS 96.00.9F.00.01 were compared with nothing',
      );
      expect(await page.$eval('#facts', (dl) => dl.textContent ?? '')).toContain('GPU reports1');
    } finally {
      await page.close();
    }
  });

  it('shows a GPU report changed by one measurement byte as failed: the GPU did not sign it', async () => {
    const tampered = Buffer.from(realReport());
    tampered[MEASUREMENT_BYTE] = tampered[MEASUREMENT_BYTE]! ^ 0x01;
    answer(tampered);
    const page = await browser.newPage();
    try {
      const verdict = await verifyWithRecordedNonce(page, undefined, other);
      await shot(page, 'gpu-evidence-tampered');
      expect(verdict).toBe('Not verified: at least one check failed.');
      const lines = await checkLines(page);
      expect(Object.entries(statuses(lines)).filter(([, s]) => s === 'FAIL')).toEqual([['gpu[0].signature', 'FAIL']]);
      expect(lines['gpu[0].signature']?.detail).toBe(
        "the report's signature does not verify with the device certificate's key (GH100 A01 GSP FMC LF): the report was changed or comes from another GPU",
      );
      // Sigil bound the hash of what it was given: the binding holds, the GPU's signature does not.
      expect(lines['gpu.binding']?.status).toBe('PASS');
    } finally {
      await page.close();
      answer(realReport());
    }
  });

  it("compares the measurements with the RIM files the user loads: NVIDIA's samples are expired and for other versions", async () => {
    const page = await browser.newPage();
    try {
      const verdict = await verifyWithRecordedNonce(page, async (p) => {
        const input = (await p.$('#rim-files')) as ElementHandle<HTMLInputElement>;
        await input.uploadFile(join(NVIDIA_VECTORS, 'driver-rim-test.swidtag'), join(NVIDIA_VECTORS, 'vbios-rim-test.swidtag'));
      });
      await shot(page, 'gpu-evidence-rims');
      expect(verdict).toBe('Not verified: at least one check failed.');
      const lines = await checkLines(page);
      expect(statuses(lines)).toEqual({
        'gpu.binding': 'PASS',
        'gpu.rim[0].signature': 'PASS',
        'gpu.rim[0].schema': 'PASS',
        'gpu.rim[0].chain': 'FAIL',
        'gpu.rim[1].signature': 'PASS',
        'gpu.rim[1].schema': 'PASS',
        'gpu.rim[1].chain': 'FAIL',
        'gpu[0].report': 'PASS',
        'gpu[0].certificates': 'PASS',
        'gpu[0].signature': 'PASS',
        'gpu[0].chain': 'PASS',
        'gpu[0].root': 'PASS',
        'gpu[0].fwid': 'PASS',
        'gpu[0].nonce': 'PASS',
        'gpu[0].driver_rim': 'FAIL',
        'gpu[0].vbios_rim': 'FAIL',
        'gpu[0].measurements': 'FAIL',
        'gpu[0].revocation': 'NOT PINNED',
      });
      expect(lines['gpu.rim[0].signature']?.detail).toBe(
        'the driver RIM 545.00 (GH100) is signed as a whole (ECDSA P-384, SHA-384) by HCC RIM L4 Signer, the key named in it',
      );
      expect(lines['gpu.rim[0].chain']?.detail).toMatch(
        /^the driver RIM 545\.00 \(GH100\)'s signer does not chain to NVIDIA's RIM root at .*: .* is not valid at /,
      );
      expect(lines['gpu[0].driver_rim']?.detail).toBe('no verified RIM describes driver 550.90.07 (verified driver RIMs: none)');
    } finally {
      await page.close();
    }
  });

  it('offers the RIM input with a label, after the reference-values file in keyboard order', async () => {
    const page = await browser.newPage();
    try {
      await page.goto(`${sigil.url}/`, { waitUntil: 'load' });
      expect(await page.$eval('label[for="rim-files"]', (l) => l.textContent)).toBe(
        'NVIDIA RIM files for the GPUs (.swidtag or .xml, several at once; optional)',
      );
      expect(await page.$eval('#rim-files', (i) => [(i as HTMLInputElement).multiple, (i as HTMLInputElement).accept])).toEqual([
        true,
        '.swidtag,.xml,application/xml,text/xml',
      ]);
      await page.focus('#reference-file');
      await page.keyboard.press('Tab');
      expect(await page.evaluate(() => document.activeElement?.id)).toBe('rim-files');
    } finally {
      await page.close();
    }
  });

  it('fails gpu.rims when the reference values name RIMs that were not loaded into the page', async () => {
    const page = await browser.newPage();
    try {
      const verdict = await verifyWithRecordedNonce(page, async (p) => {
        await p.$eval('#reference', (area) => ((area as HTMLTextAreaElement).value = 'gpu:\n  rims: [driver.swidtag, vbios.swidtag]\n'));
      });
      expect(verdict).toBe('Not verified: at least one check failed.');
      const lines = await checkLines(page);
      expect(lines['gpu.rims']).toEqual({
        status: 'FAIL',
        title: 'GPU evidence',
        detail: 'the reference values name 2 RIM(s) but only 0 could be read, so the GPU measurements cannot all be compared',
      });
      expect(lines['gpu[0].measurements']?.status).toBe('NOT PINNED');
    } finally {
      await page.close();
    }
  });
});
