import { afterEach, describe, expect, it } from 'vitest';
import { engineAndSigil } from '../../support/engine-and-sigil.ts';

const served = engineAndSigil({
  modelNames: ['engine/renamed', 'm'],
  models: [{ id: 'renamed', upstream_model: 'engine/renamed', upstream: 'e' }, { id: 'm' }],
});

afterEach(() => {
  served.engine.behaviour = {};
});

const post = (model: string, stream: boolean) =>
  fetch(`${served.sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${served.sigil.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], stream }),
  });

describe('the relay step', () => {
  it("sends a JSON answer as the engine's bytes, the model value alone put back to the catalogue's name", async () => {
    const res = await post('renamed', false);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    const text = await res.text();
    expect(res.headers.get('content-length')).toBe(String(Buffer.byteLength(text)));
    const direct = await fetch(`${served.engine.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'engine/renamed', messages: [{ role: 'user', content: 'hi' }], stream: false }),
    });
    const stripIds = (t: string) => t.replace(/chatcmpl-[0-9a-f]+/g, 'ID').replace(/"created":\d+/g, '"created":0');
    expect(stripIds(text)).toBe(stripIds((await direct.text()).replace('"model":"engine/renamed"', '"model":"renamed"')));
    expect(text).not.toContain('engine/renamed');
  });

  it('relays a stream event by event, unbuffered, with the stream headers, ending with [DONE]', async () => {
    served.engine.reply = 'one two three';
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

describe('the relay step with many streams at once', () => {
  it("relays 24 concurrent streams whole without Node's listener-leak warning (each open stream listens for the shutdown cut)", async () => {
    served.engine.reply = 'a b c';
    served.engine.behaviour = { chunkDelayMs: 20 };
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    try {
      const texts = await Promise.all(Array.from({ length: 24 }, async () => (await post('m', true)).text()));
      expect(texts.filter((t) => t.endsWith('data: [DONE]\n\n')).length).toBe(24);
      // A warning is emitted on the next tick after the listener that crossed the limit was added.
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings).not.toContain('MaxListenersExceededWarning');
  });
});
