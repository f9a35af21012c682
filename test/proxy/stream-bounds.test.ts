import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** Issue 37: no stream runs for ever or grows without bound (limits.max_stream_seconds, limits.max_stream_bytes). */
let engine: TestEngine;
let sigil: TestSigil;
const MAX_BYTES = 8192;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'm' }],
    config: { limits: { max_stream_seconds: 1, max_stream_bytes: MAX_BYTES } },
  });
});

afterAll(async () => {
  await sigil.close();
  await engine.close();
});

const chunk = (content: string) =>
  `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"${content}"},"finish_reason":null}]}\n\n`;

async function stream(): Promise<{ status: number; text: string; seconds: number }> {
  const started = performance.now();
  const res = await fetch(`${sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-service-receipt': 'true' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true }),
  });
  return { status: res.status, text: await res.text(), seconds: (performance.now() - started) / 1000 };
}

const errorEvent = (code: string, type: string, message: string) => `data: ${JSON.stringify({ error: { message, type, param: null, code } })}\n\n`;

describe('stream bounds', () => {
  it('a stream still running after limits.max_stream_seconds ends with an OpenAI-shaped error event, no receipt, and the engine request is cancelled', async () => {
    const aborted = engine.nextAbort();
    // 60 small events 250 ms apart: 15 s of stream, each event well under the byte bound in total until the cut.
    engine.behaviour = { rawStream: Array.from({ length: 60 }, () => chunk('.')), chunkDelayMs: 250 };
    const { status, text, seconds } = await stream();
    expect(status).toBe(200);
    expect(text.startsWith(chunk('.'))).toBe(true);
    expect(text.endsWith(errorEvent('upstream_timeout', 'upstream_error', 'The stream ran longer than limits.max_stream_seconds (1 s) and was ended.'))).toBe(
      true,
    );
    expect(text).not.toMatch(/^: ?receipt /m);
    expect(seconds).toBeLessThan(10);
    await aborted;
  });

  it('a stream that would pass limits.max_stream_bytes ends with an error event before the byte that passes it', async () => {
    const aborted = engine.nextAbort();
    engine.behaviour = { rawStream: Array.from({ length: 200 }, () => chunk('x'.repeat(50))), chunkDelayMs: 5 };
    const { text } = await stream();
    const ending = errorEvent('upstream_bad_response', 'upstream_error', `The stream grew past limits.max_stream_bytes (${MAX_BYTES} bytes) and was ended.`);
    expect(text.endsWith(ending)).toBe(true);
    expect(Buffer.byteLength(text) - Buffer.byteLength(ending)).toBeLessThanOrEqual(MAX_BYTES);
    expect(Buffer.byteLength(text) - Buffer.byteLength(ending)).toBeGreaterThan(MAX_BYTES - 400);
    expect(text).not.toMatch(/^: ?receipt /m);
    await aborted;
  });

  it('a stream within both bounds is relayed whole, with its receipt', async () => {
    engine.behaviour = { rawStream: [chunk('a'), chunk('b'), 'data: [DONE]\n\n'] };
    const { text } = await stream();
    expect(text.startsWith(`${chunk('a')}${chunk('b')}data: [DONE]\n\n`)).toBe(true);
    expect(text).toMatch(/^: receipt /m);
  });
});
