import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { runSigilCli } from '../support/cli.ts';
import { attestedLog, integrated } from '../support/transparency-log.ts';
import { formatVerifierKey } from '../../src/protocol/tlog/note.ts';
import { fetchCheckpoint, verifyLogConsistency, verifyReceiptInLog, verifyWholeLog, type TrustedLog } from '../../src/verify/tlog/log-client.ts';

let engine: TestEngine;
let sigil: TestSigil | undefined;
const logDir = mkdtempSync(join(tmpdir(), 'sigil-tlog-'));
const work = mkdtempSync(join(tmpdir(), 'sigil-tlog-cli-'));

async function start(dir = logDir): Promise<TestSigil> {
  return startTestSigil({
    upstreams: { main: { url: engine.baseUrl } },
    models: [{ id: 'm1' }],
    config: { brand: 'Acme', transparency_log: { dir, batch_ms: 50 } },
  });
}

async function chat(s: TestSigil, stream = false): Promise<Response> {
  return fetch(`${s.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json', 'x-acme-receipt': 'true' },
    body: JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'log me' }], ...(stream ? { stream: true } : {}) }),
  });
}

/** The log as a client finds it: the key and origin the attestation binding names. */
async function trusted(s: TestSigil): Promise<TrustedLog> {
  const { log, keyOrigin } = await attestedLog(s.url);
  expect(keyOrigin).toEqual({ origin: 'generated' });
  expect(log.key.name).toBe(log.origin);
  return log;
}

const cli = runSigilCli;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m1'] });
});

afterAll(async () => {
  await sigil?.close();
  await engine.close();
});

describe('receipts in the transparency log', () => {
  let log: TrustedLog;
  const receipts: string[] = [];

  it('appends every receipt, names its leaf index, and proves its inclusion once integrated', async () => {
    sigil = await start();
    log = await trusted(sigil);
    const res = await chat(sigil);
    expect(res.status).toBe(200);
    const jws = res.headers.get('x-acme-receipt')!;
    receipts.push(jws);
    expect(res.headers.get('x-acme-log-index')).toBe('0');
    const cp = await integrated(log, 1);
    const found = await verifyReceiptInLog(log, jws, { index: 0, checkpoint: cp });
    expect(found.index).toBe(0);
    // The entry is the receipt's hash and nothing else.
    const bundle = Buffer.from(await (await fetch(`${log.url}/tile/entries/000.p/${cp.size}`)).arrayBuffer());
    expect(bundle.subarray(2, 34).equals(createHash('sha256').update(jws).digest())).toBe(true);
  });

  it('logs both receipts of a stream; the message receipt is found by its receipt id', async () => {
    const res = await chat(sigil!, true);
    const modelReceipt = res.headers.get('x-acme-receipt')!;
    const text = await res.text();
    const messageReceipt = /: receipt (\S+)\n\n$/.exec(text)![1]!;
    receipts.push(modelReceipt, messageReceipt);
    expect(res.headers.get('x-acme-log-index')).toBe('1');
    const cp = await integrated(log, 3);
    expect((await verifyReceiptInLog(log, modelReceipt, { checkpoint: cp })).index).toBe(1);
    expect((await verifyReceiptInLog(log, messageReceipt, { checkpoint: cp })).index).toBe(2);
  });

  it('refuses a receipt the log does not hold', async () => {
    const forged = receipts[0]!.slice(0, -4) + 'AAAA';
    await expect(verifyReceiptInLog(log, forged, { index: 0 })).rejects.toThrow(/holds no entry equal to SHA-256 of this receipt/);
  });

  it('serves tiles that hash to the checkpoint, as `sigil log verify` checks', async () => {
    const report = await verifyWholeLog(log);
    expect(report.entries).toBe(3);
    const state = join(work, 'seen.json');
    const out = await cli('log', 'verify', sigil!.url, '--log-key', formatVerifierKey(log.key), '--witnesses', '0', '--state', state);
    expect(out.stdout).toMatch(/^PASS log.tiles — all 3 entries are 32-byte receipt hashes/m);
    expect(out.stdout.trim().split('\n').at(-1)).toBe('verified with waivers: 4 checks passed; 1 waived (log.witnesses)');
    expect(out.code).toBe(0);
  });

  it('`sigil log receipt` checks one receipt: PASS for a logged one, FAIL for another', async () => {
    const file = join(work, 'receipt.jws');
    writeFileSync(file, receipts[2]!);
    const vkey = formatVerifierKey(log.key);
    const ok = await cli('log', 'receipt', sigil!.url, '--receipt', file, '--log-key', vkey, '--witnesses', '0', '--state', join(work, 'seen-r.json'));
    expect(ok.stdout).toMatch(
      /^PASS log.inclusion — the receipt is entry 2 of the log: its inclusion proof leads from SHA-256 of the receipt to the checkpoint's root$/m,
    );
    expect(ok.code).toBe(0);
    const other = await cli(
      'log',
      'receipt',
      sigil!.url,
      '--receipt',
      receipts[0]!.slice(0, -4) + 'AAAA',
      '--index',
      '0',
      '--log-key',
      vkey,
      '--witnesses',
      '0',
    );
    expect(other.stdout).toMatch(/^FAIL log.inclusion — ERR_TLOG_PROOF: the log holds no entry equal to SHA-256 of this receipt at index 0/m);
    expect(other.code).toBe(1);
  });

  it('restarts with a new key, checks the stored tree, and extends it: old proofs still hold, the new checkpoint is consistent', async () => {
    const before = await fetchCheckpoint(log);
    await sigil!.close();
    sigil = await start();
    const again = await trusted(sigil);
    expect(again.origin).toBe(log.origin);
    expect(again.key.publicKey.equals(log.key.publicKey)).toBe(false);
    const res = await chat(sigil);
    expect(res.headers.get('x-acme-log-index')).toBe('3');
    const after = await integrated(again, 4);
    await verifyLogConsistency(again, before, after);
    await verifyReceiptInLog(again, receipts[0]!, { index: 0, checkpoint: after });
    log = again;
  });
});
