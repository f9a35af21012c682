import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyReceiptInLog } from '../../src/verify/tlog/log-client.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { attestedLog, integrated } from '../support/transparency-log.ts';

/** Issue 50: a Messages exchange's receipts are in the transparency log as chat's are, both of a stream's. */
let engine: TestEngine;
let sigil: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m1'] });
  sigil = await startTestSigil({
    upstreams: { main: { url: engine.baseUrl } },
    models: [{ id: 'm1', endpoints: ['messages'] }],
    config: { transparency_log: { dir: mkdtempSync(join(tmpdir(), 'sigil-tlog-messages-')), batch_ms: 50 } },
  });
});
afterAll(async () => {
  await sigil.close();
  await engine.close();
});

const post = (stream: boolean) =>
  fetch(`${sigil.url}/v1/messages`, {
    method: 'POST',
    headers: { 'x-api-key': sigil.key, 'content-type': 'application/json', 'x-service-receipt': 'true' },
    body: JSON.stringify({ model: 'm1', max_tokens: 16, stream, messages: [{ role: 'user', content: 'log me' }] }),
  });

describe('Messages receipts in the transparency log', () => {
  it("logs a JSON answer's receipt and a stream's two, each proven included at the index it was given", async () => {
    const { log } = await attestedLog(sigil.url);
    const json = await post(false);
    expect(json.headers.get('x-service-log-index')).toBe('0');
    const jsonReceipt = json.headers.get('x-service-receipt')!;
    const stream = await post(true);
    expect(stream.headers.get('x-service-log-index')).toBe('1');
    const modelReceipt = stream.headers.get('x-service-receipt')!;
    const text = await stream.text();
    const messageReceipt = /event: message_stop\ndata: \{"type":"message_stop"\}\n\n: receipt (\S+)\n\n$/.exec(text)![1]!;
    const checkpoint = await integrated(log, 3);
    expect((await verifyReceiptInLog(log, jsonReceipt, { index: 0, checkpoint })).index).toBe(0);
    expect((await verifyReceiptInLog(log, modelReceipt, { index: 1, checkpoint })).index).toBe(1);
    expect((await verifyReceiptInLog(log, messageReceipt, { index: 2, checkpoint })).index).toBe(2);
  });
});
