import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { scanJsonObject } from '../../src/protocol/json-edit.ts';
import { cacheSaltFor, cacheSaltOf, withCacheSalt } from '../../src/proxy/cache-salt.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** docs/configuration.md, "Prefix-cache isolation": one API key cannot time another's prompts through the engine's prefix cache. */
let engine: TestEngine;
let salted: TestSigil;
let plain: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  [salted, plain] = await Promise.all([
    startTestSigil({ upstreams: { e: { url: engine.baseUrl, cache_salt: true } }, models: [{ id: 'm', endpoints: ['chat', 'completions', 'embeddings'] }] }),
    startTestSigil({ upstreams: { e: { url: engine.baseUrl, cache_salt: false } }, models: [{ id: 'm' }] }),
  ]);
});

afterAll(async () => {
  await Promise.all([salted.close(0), plain.close(0)]);
  await engine.close();
});

async function engineBodyOf(s: TestSigil, key: string, path: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = await fetch(`${s.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  return JSON.parse(engine.requests.at(-1)!.body.toString('utf8')) as Record<string, unknown>;
}

const chat = { model: 'm', messages: [{ role: 'user', content: 'the same long shared prefix' }] };

describe('the prefix-cache salt', () => {
  it('is on by default for an engine the config names', () => {
    const config = parseConfig('upstreams: { e: { url: "http://127.0.0.1:8000/v1" } }\nauth: { keys_file: k }\ncatalogue: c.yaml\n', '/tmp/sigil.yaml');
    expect(config.upstreams.e!.cache_salt).toBe(true);
  });

  it('gives each API key its own cache_salt on chat and completions, the same on every request of that key, unrelated to the key or its hash', async () => {
    const first = await engineBodyOf(salted, salted.key, '/v1/chat/completions', chat);
    const again = await engineBodyOf(salted, salted.key, '/v1/chat/completions', chat);
    const other = await engineBodyOf(salted, salted.otherKey, '/v1/chat/completions', chat);
    const completions = await engineBodyOf(salted, salted.key, '/v1/completions', { model: 'm', prompt: 'the same long shared prefix' });
    expect(first.cache_salt).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(again.cache_salt).toBe(first.cache_salt);
    expect(completions.cache_salt).toBe(first.cache_salt);
    expect(other.cache_salt).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(other.cache_salt).not.toBe(first.cache_salt);
    const hash = createHash('sha256').update(salted.key).digest();
    for (const derived of [salted.key, hash.toString('hex'), hash.toString('base64url')]) expect(String(first.cache_salt)).not.toContain(derived.slice(0, 16));
    expect({ ...first, cache_salt: undefined }).toEqual({ ...chat, cache_salt: undefined });
  });

  it("replaces a client's own cache_salt (it could share one with another key), and is not sent to embeddings", async () => {
    const mine = await engineBodyOf(salted, salted.key, '/v1/chat/completions', chat);
    const chosen = await engineBodyOf(salted, salted.otherKey, '/v1/chat/completions', { ...chat, cache_salt: 'shared-salt' });
    expect(chosen.cache_salt).not.toBe('shared-salt');
    expect(chosen.cache_salt).not.toBe(mine.cache_salt);
    const embeddings = await engineBodyOf(salted, salted.key, '/v1/embeddings', { model: 'm', input: 'x' });
    expect('cache_salt' in embeddings).toBe(false);
  });

  it('is not sent when the upstream turns it off, and the policy says which engines get it', async () => {
    const body = await engineBodyOf(plain, plain.key, '/v1/chat/completions', chat);
    expect('cache_salt' in body).toBe(false);
    const upstreamsOf = async (s: TestSigil) =>
      ((await (await fetch(`${s.url}/v1/verify/policy`)).json()) as { upstreams: Array<{ cache_salt: boolean }> }).upstreams;
    expect((await upstreamsOf(salted))[0]!.cache_salt).toBe(true);
    expect((await upstreamsOf(plain))[0]!.cache_salt).toBe(false);
  });
});

describe('cacheSaltOf and withCacheSalt', () => {
  it("give the salt HKDF derives from the caller's secret, and the same bytes whether the body's scan is passed or made", () => {
    const caller = { keyHash: 'ab'.repeat(32), secret: Buffer.alloc(32, 7) };
    expect(cacheSaltOf(caller)).toBe(cacheSaltFor(caller.secret));
    expect(cacheSaltOf({ ...caller, secret: Buffer.alloc(32, 7) })).toBe(cacheSaltFor(caller.secret));
    expect(cacheSaltOf({ keyHash: 'cd'.repeat(32), secret: Buffer.alloc(32, 8) })).not.toBe(cacheSaltFor(caller.secret));
    for (const text of ['{"model":"m", "cache_salt":"mine" ,"n":1e999}', '{ "model" : "m" }', '{ }']) {
      const body = Buffer.from(text);
      expect(withCacheSalt(body, 'salt', scanJsonObject(body)).toString()).toBe(withCacheSalt(body, 'salt').toString());
    }
    expect(withCacheSalt(Buffer.from('{"model":"m", "cache_salt":"mine" ,"n":1e999}'), 'salt').toString()).toBe(
      '{"model":"m", "cache_salt":"salt" ,"n":1e999}',
    );
  });
});
