import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Identity, createTransport } from 'ehbp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { splitSealedJson } from '../../src/protocol/sealed-receipt.ts';
import { splitReceiptStream } from '../../src/verify/stream-receipt.ts';
import { verifyReceiptInLog, type TrustedLog } from '../../src/verify/tlog/log-client.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { attestedLog, integrated } from '../support/transparency-log.ts';

/** Issue 39, "each receipt names its place": under EHBP the leaf index travels sealed with the receipt, never in a clear header. */
let engine: TestEngine;
let sigil: TestSigil;
let log: TrustedLog;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m1'] });
  sigil = await startTestSigil({
    upstreams: { main: { url: engine.baseUrl } },
    models: [{ id: 'm1' }],
    config: { brand: 'Acme', transparency_log: { dir: mkdtempSync(join(tmpdir(), 'sigil-tlog-sealed-')), batch_ms: 50 } },
  });
  log = (await attestedLog(sigil.url)).log;
});

afterAll(async () => {
  await sigil.close();
  await engine.close();
});

const chatBody = (content: string, stream = false) => JSON.stringify({ model: 'm1', messages: [{ role: 'user', content }], stream });
const headers = () => ({ authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-acme-receipt': 'true' });

/** One request sealed with the npm `ehbp` client's identity, sent with the global fetch so the clear headers and the raw body can be inspected. */
async function sealedExchange(body: string) {
  const identity = await Identity.unmarshalPublicConfig(new Uint8Array(await (await fetch(`${sigil.url}/.well-known/hpke-keys`)).arrayBuffer()));
  const { request, context } = await identity.encryptRequestWithContext(
    new Request(`${sigil.url}/v1/chat/completions`, { method: 'POST', headers: headers(), body }),
  );
  const response = await fetch(request);
  const raw = Buffer.from(await response.clone().arrayBuffer());
  const opened = new Uint8Array(await (await identity.decryptResponseWithContext(response, context!)).arrayBuffer());
  return { response, raw, opened };
}

/** Every header of a response whose name or value holds a receipt, its id or a leaf index. */
function revealing(response: Response): string[] {
  return [...response.headers].filter(([name]) => /receipt|log-index|nonce/.test(name) && name !== 'ehbp-response-nonce').map(([name]) => name);
}

describe('the leaf index of a sealed exchange', () => {
  it('JSON: no clear header names it; the opened body carries it after the receipt, and the log proves the receipt there', async () => {
    const { response, raw, opened } = await sealedExchange(chatBody('sealed json'));
    expect(response.status).toBe(200);
    expect(revealing(response)).toEqual([]);
    expect(raw.toString('latin1')).not.toContain('log-index');
    const split = splitSealedJson(opened)!;
    expect(split.logIndex).toEqual(expect.any(Number));
    expect((JSON.parse(Buffer.from(split.body).toString('utf8')) as { object: string }).object).toBe('chat.completion');
    const checkpoint = await integrated(log, split.logIndex! + 1);
    expect((await verifyReceiptInLog(log, split.receipt, { index: split.logIndex!, checkpoint })).index).toBe(split.logIndex);
  });

  it('streams: no clear header names it; the sealed receipt comment carries it, and the log proves the receipt there', async () => {
    const { response, opened } = await sealedExchange(chatBody('sealed stream', true));
    expect(response.status).toBe(200);
    expect(revealing(response)).toEqual([]);
    const split = splitReceiptStream(opened);
    expect(split.logIndex).toEqual(expect.any(Number));
    expect(Buffer.from(split.body).toString('utf8')).toMatch(/data: \[DONE\]\n\n$/);
    const checkpoint = await integrated(log, split.logIndex! + 1);
    expect((await verifyReceiptInLog(log, split.receipt, { index: split.logIndex!, checkpoint })).index).toBe(split.logIndex);
  });

  it("the npm ehbp client's own transport still reads a sealed stream with receipts: the index is an SSE comment it skips", async () => {
    const transport = await createTransport(sigil.url);
    const stream = await transport.post(`${sigil.url}/v1/chat/completions`, chatBody('one two', true), { headers: headers() });
    const text = await stream.text();
    expect(text).toMatch(/data: \[DONE\]\n\n: receipt [\w-]+\.[\w-]+\.[\w-]+\n: log-index \d+\n\n$/);
  });
});

describe('clear exchanges are unchanged', () => {
  it('JSON: the leaf index in X-Acme-Log-Index, the body the engine bytes alone', async () => {
    const res = await fetch(`${sigil.url}/v1/chat/completions`, { method: 'POST', headers: headers(), body: chatBody('clear json') });
    const index = Number(res.headers.get('x-acme-log-index'));
    expect(Number.isInteger(index)).toBe(true);
    const text = await res.text();
    expect(text).not.toContain('log-index');
    await verifyReceiptInLog(log, res.headers.get('x-acme-receipt')!, { index, checkpoint: await integrated(log, index + 1) });
  });

  it("streams: the model receipt's index in the header, the stream ending with the receipt comment alone", async () => {
    const res = await fetch(`${sigil.url}/v1/chat/completions`, { method: 'POST', headers: headers(), body: chatBody('clear stream', true) });
    expect(res.headers.get('x-acme-log-index')).toMatch(/^\d+$/);
    const text = await res.text();
    expect(text).toMatch(/data: \[DONE\]\n\n: receipt [\w-]+\.[\w-]+\.[\w-]+\n\n$/);
    expect(splitReceiptStream(new TextEncoder().encode(text)).logIndex).toBeUndefined();
  });
});
