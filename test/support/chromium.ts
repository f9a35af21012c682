import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { type Browser } from 'puppeteer-core';

/** Debian's chromium, which `.ci/run` installs; the browser tests drive it with puppeteer-core. */
export const CHROMIUM = '/usr/bin/chromium';
/** Browser tests run unless SIGIL_SKIP_BROWSER_TESTS=1 says to skip them: a missing chromium fails them, never skips them silently. */
export const SKIP_BROWSER_TESTS = process.env.SIGIL_SKIP_BROWSER_TESTS === '1';
/** Where the browser tests leave their screenshots (the test output names them). */
export const SHOTS = join(tmpdir(), 'sigil-trust-page-screenshots');

/** A headless chromium with a fresh profile, quiet (no background network, sync or updates), and the screenshots folder made. */
export async function launchChromium(): Promise<Browser> {
  mkdirSync(SHOTS, { recursive: true });
  return puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    userDataDir: mkdtempSync(join(tmpdir(), 'sigil-chromium-')),
  });
}
