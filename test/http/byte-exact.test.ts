import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectVerifiedReceipt } from '../support/receipts.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** Issue 11 items 1 and 2: what the engine gets is what the receipt says, byte for byte. */
const sha256 = (b: Buffer | string) => 'sha256:' + createHash('sha256').update(b).digest('hex');

let engine: TestEngine;
let sigil: TestSigil;
/** An engine whose JSON parser keeps the FIRST copy of a key (as some do), logging the model it would serve. */
let firstKeyWins: Server;
const firstKeyModels: string[] = [];
let firstKeySigil: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m-pass', 'engine/m-rename'] });
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [
      { id: 'm-pass', upstream: 'e' },
      { id: 'm-rename', upstream: 'e', upstream_model: 'engine/m-rename' },
    ],
  });
  firstKeyWins = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req
      .on('data', (c: Buffer) => chunks.push(c))
      .on('end', () => {
        if (req.method === 'GET') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"object":"list","data":[{"id":"m-pass"}]}');
        const first = /"model"\s*:\s*"([^"]*)"/.exec(Buffer.concat(chunks).toString('utf8'));
        firstKeyModels.push(first?.[1] ?? '');
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ id: 'x', object: 'chat.completion', created: 0, model: first?.[1], choices: [] }));
      });
  });
  await new Promise<void>((r) => firstKeyWins.listen(0, '127.0.0.1', r));
  firstKeySigil = await startTestSigil({
    upstreams: { fk: { url: `http://127.0.0.1:${(firstKeyWins.address() as AddressInfo).port}/v1` } },
    models: [{ id: 'm-pass', upstream: 'fk' }],
  });
});

afterAll(async () => {
  await Promise.all([sigil.close(), firstKeySigil.close()]);
  await engine.close();
  await new Promise((r) => firstKeyWins.close(r));
});

const post = (s: TestSigil, body: string, headers: Record<string, string> = {}) =>
  fetch(`${s.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json', ...headers },
    body,
  });

describe('the bytes the engine receives', () => {
  const tail = '"seed":12345678901234567890,"temperature":1e-7,"top_p":-0.0,"logit_bias":{"50256":-1e400},"n":1E0';

  it("are the client's own bytes when the model keeps its name and no extension field is sent", async () => {
    const body = `{ "model" : "m-pass",\n "messages":[{"role":"user","content":"hi"}], ${tail} }`;
    const res = await post(sigil, body);
    expect(res.status).toBe(200);
    expect(engine.requests.at(-1)!.body.toString('utf8')).toBe(body);
  });

  it('differ only in the model value and the removed region when renamed, and the receipt hashes both', async () => {
    const body = `{"region":"eu-west", "model":"m-rename","messages":[{"role":"user","content":"hi"}],${tail}}`;
    const res = await post(sigil, body, { 'x-service-receipt': 'true', 'x-service-nonce': 'n-1' });
    expect(res.status).toBe(200);
    const got = engine.requests.at(-1)!.body.toString('utf8');
    // Old behaviour: JSON.stringify made the seed 12345678901234567000, 1e-400 and -0.0 became 0 and -1e400 null.
    expect(got).toBe(`{"model":"engine/m-rename","messages":[{"role":"user","content":"hi"}],${tail}}`);
    const jws = res.headers.get('x-service-receipt')!;
    const claims = decodeJwt(jws);
    expect(claims.schema_version).toBe('1.2.0');
    expect(claims.request_hash).toBe(sha256(body));
    expect(claims.forwarded_request_hash).toBe(sha256(got));
    await expectVerifiedReceipt(sigil.url, jws, { nonce: 'n-1', requestBytes: Buffer.from(body), responseBytes: Buffer.from(await res.arrayBuffer()) });
  });

  it("carry no forwarded_request_hash when they are the client's own", async () => {
    const res = await post(sigil, `{"model":"m-pass","messages":[{"role":"user","content":"hi"}]}`, { 'x-service-receipt': 'true' });
    expect(decodeJwt(res.headers.get('x-service-receipt')!).forwarded_request_hash).toBeUndefined();
  });
});

describe('duplicate keys', () => {
  it('are refused with 400 duplicate_key before a first-key-wins engine could serve an unlisted model', async () => {
    const before = firstKeyModels.length;
    const res = await post(firstKeySigil, '{"model":"secret-unlisted","model":"m-pass","messages":[{"role":"user","content":"hi"}]}');
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: {
        message: "The key 'model' appears twice in one object of the request body; send each key once.",
        type: 'invalid_request_error',
        param: 'model',
        code: 'duplicate_key',
      },
    });
    expect(firstKeyModels.length).toBe(before);
  });

  it('are found at any depth and under escapes ("\\u006d" is "m"), and the path is named', async () => {
    const res = await post(sigil, '{"model":"m-pass","messages":[{"role":"user","content":"a","\\u0063ontent":"b"}]}');
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ code: 'duplicate_key', param: 'messages[0].content' });
  });

  it('anywhere in a random body are refused and never reach the engine (property)', async () => {
    const key = fc.constantFrom('model', 'stream', 'messages', 'max_tokens', 'role', 'content', 'x');
    const value = fc.oneof(fc.constant('"m-pass"'), fc.constant('true'), fc.constant('1'), fc.constant('[]'), fc.constant('{"a":1}'));
    await fc.assert(
      fc.asyncProperty(key, value, value, fc.constantFrom('top', 'message', 'nested'), async (k, v1, v2, where) => {
        const dup = `"${k}":${v1},"${k}":${v2}`;
        const user = where === 'message' ? `{"role":"user","content":"hi",${dup}}` : '{"role":"user","content":"hi"}';
        const body =
          where === 'top'
            ? `{"model":"m-pass","messages":[${user}],${dup}}`
            : where === 'message'
              ? `{"model":"m-pass","messages":[${user}]}`
              : `{"model":"m-pass","messages":[${user}],"metadata":{"a":[{${dup}}]}}`;
        const before = engine.requests.length;
        const res = await post(sigil, body);
        expect(res.status).toBe(400);
        expect((await res.json()).error.code).toBe('duplicate_key');
        expect(engine.requests.length).toBe(before);
      }),
      { seed: 0x5161_0011, numRuns: 60 },
    );
  });
});
