import { Identity, createTransport } from 'ehbp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { splitReceiptStream } from '../../src/verify/index.ts';
import { expectVerifiedReceipt } from '../support/receipts.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** Issue 37: a sealed stream hides each event's exact length (docs/ehbp.md, "Padding"), and stays exact and verifiable. */
let engine: TestEngine;
let sigil: TestSigil;
let unpadded: TestSigil;
const BUCKET = 256;
const TAG = 16;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  [sigil, unpadded] = await Promise.all([
    startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }] }),
    startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }], config: { ehbp: { stream_padding_bytes: 0 } } }),
  ]);
});

afterAll(async () => {
  await Promise.all([sigil.close(0), unpadded.close(0)]);
  await engine.close();
});

const event = (content: string) =>
  `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}},"finish_reason":null}]}\n\n`;
/** Tokens of different lengths, each its own engine write (and so its own sealed frame). */
const TOKENS = ['Hello', ' world', ' a', ' considerably', ' longer', ' token', '!'];
const ENGINE_STREAM = [...TOKENS.map(event), 'data: [DONE]\n\n'];

/** Frame lengths of a sealed body: LEN (4 bytes) || ciphertext and tag, repeated. */
function frames(body: Buffer): number[] {
  const lengths: number[] = [];
  for (let at = 0; at < body.length;) {
    const length = body.readUInt32BE(at);
    lengths.push(length);
    at += 4 + length;
  }
  return lengths;
}

/** The events an SSE parser sees (comment lines dropped, as the EventSource algorithm drops them), each as its data lines. */
function sseEvents(text: string): string[] {
  return text
    .split('\n\n')
    .map((block) =>
      block
        .split('\n')
        .filter((line) => line !== '' && !line.startsWith(':'))
        .join('\n'),
    )
    .filter((block) => block !== '');
}

async function sealedStream(s: TestSigil, path = '/v1/chat/completions') {
  engine.behaviour = path === '/v1/chat/completions' ? { rawStream: ENGINE_STREAM, chunkDelayMs: 15 } : {};
  const body =
    path === '/v1/chat/completions'
      ? JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true })
      : JSON.stringify({ model: 'm', input: 'hi', stream: true });
  const keyConfig = new Uint8Array(await (await fetch(`${s.url}/.well-known/hpke-keys`)).arrayBuffer());
  const identity = await Identity.unmarshalPublicConfig(keyConfig);
  const { request, context } = await identity.encryptRequestWithContext(
    new Request(`${s.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json', 'x-service-receipt': 'true', 'x-service-nonce': 'n-pad' },
      body,
    }),
  );
  const response = await fetch(request);
  const raw = Buffer.from(await response.clone().arrayBuffer());
  const opened = Buffer.from(await (await identity.decryptResponseWithContext(response, context!)).arrayBuffer());
  engine.behaviour = {};
  return { body, raw, opened };
}

describe('token-length padding under EHBP', () => {
  it('on by default: every event frame is a multiple of the bucket, so events of different token lengths leave as frames of equal length', async () => {
    const { raw } = await sealedStream(sigil);
    const lengths = frames(raw);
    // One frame per engine write, then the receipt comment's.
    expect(lengths).toHaveLength(ENGINE_STREAM.length + 1);
    const eventFrames = lengths.slice(0, TOKENS.length);
    for (const length of eventFrames) expect((length - TAG) % BUCKET).toBe(0);
    expect(new Set(eventFrames).size).toBe(1);
    expect((lengths[TOKENS.length]! - TAG) % BUCKET).toBe(0);
  });

  it('the client gets exactly the engine events, in order, and the receipt verifies over the bytes it decrypted', async () => {
    const { body, opened } = await sealedStream(sigil);
    expect(sseEvents(opened.toString('utf8')).slice(0, ENGINE_STREAM.length)).toEqual(sseEvents(ENGINE_STREAM.join('')));
    const split = splitReceiptStream(opened);
    // The engine's bytes, unchanged and in order, are what remains once the padding comment lines are taken out.
    expect(
      Buffer.from(split.body)
        .toString('utf8')
        .replace(/^:[^\n]*\n/gm, ''),
    ).toBe(ENGINE_STREAM.join(''));
    await expectVerifiedReceipt(sigil.url, split.receipt, {
      nonce: 'n-pad',
      requestBytes: Buffer.from(body),
      responseBytes: split.body,
      receiptType: 'message',
    });
  });

  it("the npm ehbp client's own transport reads the padded stream as the same events", async () => {
    engine.behaviour = { rawStream: ENGINE_STREAM, chunkDelayMs: 15 };
    try {
      const transport = await createTransport(sigil.url);
      const stream = await transport.post(
        `${sigil.url}/v1/chat/completions`,
        JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true }),
        {
          headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
        },
      );
      expect(sseEvents(await stream.text())).toEqual(sseEvents(ENGINE_STREAM.join('')));
    } finally {
      engine.behaviour = {};
    }
  });

  it('a /v1/responses stream (ended by its response.completed event, no [DONE]) is padded too, and its receipt verifies', async () => {
    const { body, raw, opened } = await sealedStream(sigil, '/v1/responses');
    const lengths = frames(raw);
    expect(lengths.length).toBeGreaterThan(3);
    for (const length of lengths.slice(0, -1)) expect((length - TAG) % BUCKET).toBe(0);
    const split = splitReceiptStream(opened, { ending: 'event' });
    expect(Buffer.from(split.body).toString('utf8')).toContain('response.completed');
    await expectVerifiedReceipt(sigil.url, split.receipt, {
      nonce: 'n-pad',
      requestBytes: Buffer.from(body),
      responseBytes: split.body,
      receiptType: 'message',
    });
  });

  it('ehbp.stream_padding_bytes: 0 turns it off: each frame is its event plus the tag', async () => {
    const { raw } = await sealedStream(unpadded);
    expect(frames(raw).slice(0, ENGINE_STREAM.length)).toEqual(ENGINE_STREAM.map((e) => Buffer.byteLength(e) + TAG));
  });
});
