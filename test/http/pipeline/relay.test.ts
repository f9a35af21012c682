import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../../support/sigil.ts';

let engine: TestEngine;
let sigil: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['engine/renamed', 'm'] });
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'renamed', upstream_model: 'engine/renamed', upstream: 'e' }, { id: 'm' }],
  });
});

afterAll(async () => {
  await sigil.close(0);
  await engine.close();
});

afterEach(() => {
  engine.behaviour = {};
});

const post = (model: string, stream: boolean) =>
  fetch(`${sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], stream }),
  });

describe('the relay step', () => {
  it("sends a JSON answer as the engine's bytes, the model value alone put back to the catalogue's name", async () => {
    const res = await post('renamed', false);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    const text = await res.text();
    expect(res.headers.get('content-length')).toBe(String(Buffer.byteLength(text)));
    const direct = await fetch(`${engine.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'engine/renamed', messages: [{ role: 'user', content: 'hi' }], stream: false }),
    });
    const stripIds = (t: string) => t.replace(/chatcmpl-[0-9a-f]+/g, 'ID').replace(/"created":\d+/g, '"created":0');
    expect(stripIds(text)).toBe(stripIds((await direct.text()).replace('"model":"engine/renamed"', '"model":"renamed"')));
    expect(text).not.toContain('engine/renamed');
  });

  it('relays a stream event by event, unbuffered, with the stream headers, ending with [DONE]', async () => {
    engine.reply = 'one two three';
    const res = await post('m', true);
    expect(res.status).toBe(200);
    expect([res.headers.get('content-type'), res.headers.get('cache-control'), res.headers.get('x-accel-buffering')]).toEqual([
      'text/event-stream; charset=utf-8',
      'no-cache',
      'no',
    ]);
    const text = await res.text();
    const contents = text
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .map((e) => (JSON.parse(e.slice(6)) as { choices: Array<{ delta?: { content?: string } }> }).choices[0]?.delta?.content ?? '')
      .join('');
    expect(contents).toBe('one two three');
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  });
});
