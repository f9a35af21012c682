import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyCommand } from '../../src/cli/verify.ts';
import { startForgingProxy, type ForgingProxy } from '../support/forging-proxy.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** Issue 39: `sigil verify --url` checks that the attested log holds the receipts of its live request. */
let engine: TestEngine;
let sigil: TestSigil;
let proxy: ForgingProxy;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'm' }],
    config: { transparency_log: { dir: mkdtempSync(join(tmpdir(), 'sigil-tlog-verify-')), batch_ms: 50 } },
  });
  proxy = await startForgingProxy(sigil.url);
});

afterAll(async () => {
  await proxy.close();
  await sigil.close(0);
  await engine.close();
});

async function sigilVerify(argv: string[]): Promise<{ code: number; stdout: string }> {
  let stdout = '';
  const io = { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: () => true }, stdin: Readable.from([]), env: {} };
  const code = await verifyCommand(['-v', ...argv], io);
  return { code, stdout };
}

const logLines = (stdout: string) => [...stdout.matchAll(/^(PASS|FAIL|WAIVED|----) (log\.\S+) — (.*)$/gm)].map((m) => `${m[1]} ${m[2]}`);

describe('sigil verify --url and the transparency log', () => {
  it('JSON: the receipt of the live request is proven in the log the attestation binds', async () => {
    const r = await sigilVerify(['--url', sigil.url, '--api-key', sigil.key, '--allow-no-tee', '--allow-unpinned-code']);
    expect(logLines(r.stdout)).toEqual(['PASS log.checkpoint', 'PASS log.consistency', 'PASS log.inclusion']);
    expect(r.stdout).toMatch(/^PASS log\.inclusion — receipt \S+ is entry \d+ of the log: its inclusion proof leads from SHA-256 of the receipt to the root/m);
    expect(r.code).toBe(0);
  });

  it('a stream: both its receipts are proven in the log', async () => {
    const r = await sigilVerify(['--url', sigil.url, '--api-key', sigil.key, '--stream', '--allow-no-tee', '--allow-unpinned-code']);
    expect(logLines(r.stdout)).toEqual(['PASS log.checkpoint', 'PASS log.consistency', 'PASS log.inclusion', 'PASS log.model_receipt_inclusion']);
    expect(r.code).toBe(0);
  });

  it('`sigil verify RECEIPT --url BASE --log` checks a kept receipt later; one the log never held fails', async () => {
    const res = await fetch(`${sigil.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-service-receipt': 'true' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'keep my receipt' }] }),
    });
    const jws = res.headers.get('x-service-receipt')!;
    const index = res.headers.get('x-service-log-index')!;
    const file = join(mkdtempSync(join(tmpdir(), 'sigil-tlog-kept-')), 'receipt.jws');
    writeFileSync(file, jws);
    const byId = await sigilVerify([file, '--url', sigil.url, '--log', '--allow-no-tee', '--allow-unpinned-code']);
    expect(logLines(byId.stdout)).toEqual(['PASS log.checkpoint', 'PASS log.consistency', 'PASS log.inclusion']);
    expect(byId.stdout).toMatch(new RegExp(`^PASS log\\.inclusion — receipt \\S+ is entry ${index} of the log`, 'm'));
    writeFileSync(file, jws.slice(0, -4) + 'AAAA');
    const other = await sigilVerify([file, '--url', sigil.url, '--log', '--log-index', index, '--allow-no-tee', '--allow-unpinned-code']);
    expect(logLines(other.stdout)).toEqual(['PASS log.checkpoint', 'PASS log.consistency', 'FAIL log.inclusion']);
    expect(other.code).toBe(1);
  });

  it('a log that omits the leaf fails the verdict', async () => {
    proxy.rewrite = (_m, path) =>
      path.startsWith('/v1/log/proof') ? (body) => Buffer.from(JSON.stringify({ ...JSON.parse(body.toString()), proofs: [] })) : undefined;
    try {
      const r = await sigilVerify(['--url', proxy.url, '--api-key', sigil.key, '--allow-no-tee', '--allow-unpinned-code']);
      expect(logLines(r.stdout)).toEqual(['PASS log.checkpoint', 'PASS log.consistency', 'FAIL log.inclusion']);
      expect(r.stdout).toMatch(/^FAIL log\.inclusion — ERR_TLOG_PROOF: the log holds no entry equal to SHA-256 of this receipt/m);
      expect(r.code).toBe(1);
    } finally {
      proxy.reset();
    }
  });
});
