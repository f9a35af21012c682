import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { firstBody, rawRequest } from '../support/raw-http.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/**
 * API keys: only an exact key is accepted. Keys that share a prefix, a length or all but one
 * character with a real key are refused the same way, and no answer echoes what was presented.
 */
let engine: TestEngine;
let sigil: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm', upstream: 'e' }] });
});

afterAll(async () => {
  await sigil.close();
  await engine.close();
});

const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });

async function withAuthorization(value: string): Promise<{ status: number; text: string; headers: string }> {
  const res = await fetch(`${sigil.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: value, 'content-type': 'application/json' }, body });
  return { status: res.status, text: await res.text(), headers: JSON.stringify([...res.headers]) };
}

/** Replaces the character at `i` with another one of the key alphabet. */
const flip = (key: string, i: number) => key.slice(0, i) + (key[i] === 'A' ? 'B' : 'A') + key.slice(i + 1);

describe('API key comparison', () => {
  it('the real keys work (control)', async () => {
    expect((await withAuthorization(`Bearer ${sigil.key}`)).status).toBe(200);
    expect((await withAuthorization(`Bearer ${sigil.otherKey}`)).status).toBe(200);
    expect((await withAuthorization(`bearer ${sigil.key}`)).status).toBe(200);
  });

  it('near misses are refused with 401 invalid_api_key and never echoed', async () => {
    const key = sigil.key;
    const prefix = /^[a-z]+-[a-z]+-/.exec(key)?.[0] ?? '';
    expect(prefix).not.toBe('');
    const nearMisses = [
      flip(key, key.length - 1),
      flip(key, prefix.length),
      flip(key, Math.floor(key.length / 2)),
      prefix + 'A'.repeat(key.length - prefix.length),
      key.slice(0, -1),
      key + 'A',
      key.toUpperCase(),
      key.toLowerCase() === key ? key + key : key.toLowerCase(),
      key.slice(prefix.length),
      `${key}${sigil.otherKey}`,
    ];
    for (const candidate of nearMisses) {
      expect(candidate).not.toBe(key);
      const res = await withAuthorization(`Bearer ${candidate}`);
      expect(res.status, candidate).toBe(401);
      expect(JSON.parse(res.text)).toEqual({
        error: { message: 'Incorrect API key provided.', type: 'authentication_error', param: null, code: 'invalid_api_key' },
      });
      expect(res.text + res.headers).not.toContain(candidate.slice(prefix.length, prefix.length + 12));
    }
  });

  it('the stored hash is not a key', async () => {
    const file = readFileSync(join(sigil.dir, 'api-keys'), 'utf8');
    const hashes = [...file.matchAll(/sha256:([0-9a-f]{64})/g)].map((m) => m[1]!);
    expect(hashes.length).toBeGreaterThanOrEqual(2);
    for (const hash of hashes) {
      expect((await withAuthorization(`Bearer ${hash}`)).status).toBe(401);
      expect((await withAuthorization(`Bearer sha256:${hash}`)).status).toBe(401);
    }
  });

  it('other schemes and shapes are refused', async () => {
    for (const value of [
      sigil.key,
      `Basic ${Buffer.from(`user:${sigil.key}`).toString('base64')}`,
      `Token ${sigil.key}`,
      `Bearer`,
      `Bearer ${sigil.key} extra`,
      `Bearer  ${sigil.key},${sigil.key}`,
    ]) {
      const res = await withAuthorization(value);
      expect(res.status, value).toBe(401);
      expect(JSON.parse(res.text).error.type).toBe('authentication_error');
      expect(res.text).not.toContain(sigil.key);
    }
  });

  it.each([
    ['a wrong key, then the right one', (k: string) => [flip(k, k.length - 1), k]],
    ['the right key, then a wrong one', (k: string) => [k, flip(k, k.length - 1)]],
  ])('two Authorization headers (%s) are refused with 400 duplicate_header, whichever copy a front proxy would pick', async (_name, order) => {
    const [first, second] = order(sigil.key);
    const request = `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${first}\r\nAuthorization: Bearer ${second}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`;
    const exchange = await rawRequest(sigil.url, [request], { waitMs: 2000 });
    expect(exchange.statuses).toEqual([400]);
    expect(JSON.parse(firstBody(exchange)).error).toMatchObject({ code: 'duplicate_header', param: 'authorization', type: 'invalid_request_error' });
  });

  it('a receipt is served only to the key that made the request', async () => {
    const res = await fetch(`${sigil.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-service-receipt': 'true' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true }),
    });
    await res.text();
    const id = res.headers.get('x-service-receipt-id')!;
    const get = (auth: string) => fetch(`${sigil.url}/v1/receipts/${id}`, { headers: { authorization: auth } }).then((r) => r.status);
    expect(await get(`Bearer ${sigil.key}`)).toBe(200);
    expect(await get(`Bearer ${sigil.otherKey}`)).toBe(404);
    expect(await get(`Bearer ${flip(sigil.key, sigil.key.length - 1)}`)).toBe(401);
    expect(await get('')).toBe(401);
  });
});
