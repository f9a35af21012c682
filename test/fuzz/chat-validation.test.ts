import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';
import { firstBody, rawRequest } from '../support/raw-http.ts';

/**
 * Property tests: whatever a client sends to /v1/chat/completions, Sigil answers with an OpenAI
 * error and a 4xx, or forwards a valid request and relays the engine's 200; it never crashes,
 * never answers 5xx for client-side garbage, and keeps serving. Fixed seed, bounded runs.
 */
const SEED = 0x5161_0006;
const CONTEXT_WINDOW = 4096;
const MODELS = ['same', 'renamed'] as const;

let engine: TestEngine;
let sigil: TestSigil;

beforeAll(async () => {
  // The engine accepts any length so that every request valid for Sigil gets a 200.
  engine = await startTestEngine({ modelNames: ['same', 'engine/renamed'], contextWindow: 1e12 });
  engine.reply = 'ok';
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [
      { id: 'same', upstream: 'e', context_window: CONTEXT_WINDOW },
      { id: 'renamed', upstream_model: 'engine/renamed', upstream: 'e', context_window: CONTEXT_WINDOW },
    ],
    config: { limits: { max_body_bytes: 1024 * 1024 } },
  });
});

afterAll(async () => {
  await sigil.close();
  await engine.close();
});

afterEach(async () => {
  // Sigil runs in this process: a pollution of Object.prototype by any body would show here.
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  expect((await fetch(`${sigil.url}/healthz`)).status).toBe(200);
  expect(sigil.logs.filter((line) => line.includes('"unhandled error"'))).toEqual([]);
});

interface Answer {
  status: number;
  type: string;
  text: string;
}

async function post(body: string | Uint8Array<ArrayBuffer>, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(`${sigil.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', ...headers },
    body,
  });
  return { status: res.status, type: res.headers.get('content-type') ?? '', text: await res.text() };
}

/** Asserts an OpenAI-shaped error with a 4xx status, and returns it. */
function expectClientError(answer: Answer): { message: string; type: string; param: string | null; code: string | null } {
  expect(answer.status, answer.text).toBeGreaterThanOrEqual(400);
  expect(answer.status, answer.text).toBeLessThan(500);
  expect(answer.type).toBe('application/json');
  const body = JSON.parse(answer.text) as { error: { message: string; type: string; param: string | null; code: string | null } };
  expect(Object.keys(body)).toEqual(['error']);
  expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
  expect(typeof body.error.message).toBe('string');
  expect(body.error.message.length).toBeGreaterThan(0);
  expect(typeof body.error.type).toBe('string');
  expect(body.error.param === null || typeof body.error.param === 'string').toBe(true);
  expect(body.error.code === null || typeof body.error.code === 'string').toBe(true);
  return body.error;
}

/** Asserts the engine's answer came back: a completion, or a stream that ends with [DONE]. */
function expectServed(answer: Answer, model: string, stream: boolean): void {
  expect(answer.status, answer.text).toBe(200);
  if (stream) {
    expect(answer.type).toBe('text/event-stream; charset=utf-8');
    expect(answer.text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(answer.text).toContain(`"model":"${model}"`);
  } else {
    expect(answer.type).toBe('application/json');
    expect(JSON.parse(answer.text)).toMatchObject({ object: 'chat.completion', model });
  }
}

const validMessages = fc.array(fc.record({ role: fc.constantFrom('system', 'user', 'assistant'), content: fc.string({ unit: 'grapheme', maxLength: 40 }) }), {
  minLength: 1,
  maxLength: 3,
});
const weird = fc.oneof(
  fc.anything({ maxDepth: 3, withNullPrototype: false }),
  fc.constantFrom(null, true, false, 0, -1, 1.5, 1e308, -0, '', ' ', '__proto__', 'constructor', 'http://127.0.0.2:1/', [], {}),
);

/** One violation SPEC 2 says the request has: the status and `param` Sigil may answer with. */
interface Violation {
  status: number;
  param: string | null;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The SPEC 2 oracle: every rule the body breaks (empty when Sigil must forward it). */
function violations(body: unknown): Violation[] {
  if (!isObject(body)) return [{ status: 400, param: null }];
  const out: Violation[] = [];
  const { model, messages } = body;
  if (typeof model !== 'string') out.push({ status: 400, param: 'model' });
  else if (!(MODELS as readonly string[]).includes(model)) out.push({ status: 404, param: 'model' });
  if (!Array.isArray(messages) || messages.length === 0) out.push({ status: 400, param: 'messages' });
  else {
    messages.forEach((m: unknown, i) => {
      if (!isObject(m)) return out.push({ status: 400, param: `messages[${i}]` });
      const { role, content } = m;
      if (typeof role !== 'string' || role === '') return out.push({ status: 400, param: `messages[${i}].role` });
      if (!['system', 'user', 'assistant'].includes(role)) return;
      const ok = typeof content === 'string' || Array.isArray(content) || (role === 'assistant' && (content === null || content === undefined));
      if (!ok) out.push({ status: 400, param: `messages[${i}].content` });
    });
  }
  const { stream, temperature, region } = body;
  if (stream !== undefined && stream !== null && typeof stream !== 'boolean') out.push({ status: 400, param: 'stream' });
  if (temperature !== undefined && temperature !== null && !(typeof temperature === 'number' && temperature >= 0 && temperature <= 2)) {
    out.push({ status: 400, param: 'temperature' });
  }
  for (const field of ['max_tokens', 'max_completion_tokens']) {
    const v = body[field];
    if (v === undefined || v === null) continue;
    if (!(typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= CONTEXT_WINDOW)) out.push({ status: 400, param: field });
  }
  if (region !== undefined && (typeof region !== 'string' || region === '')) out.push({ status: 400, param: 'region' });
  return out;
}

async function expectOracle(text: string): Promise<void> {
  const parsed: unknown = JSON.parse(text);
  const expected = violations(parsed);
  const answer = await post(text);
  if (expected.length === 0) {
    const body = parsed as Record<string, unknown>;
    expectServed(answer, body.model as string, body.stream === true);
    return;
  }
  const error = expectClientError(answer);
  expect(expected, `answered ${answer.status} ${answer.text}`).toContainEqual({ status: answer.status, param: error.param });
}

const chatShaped = fc.record(
  {
    model: fc.oneof(fc.constantFrom(...MODELS), fc.constantFrom('nope', '__proto__', 'constructor', 'toString', 'http://evil.invalid/', 'SAME'), weird),
    messages: fc.oneof(
      { weight: 3, arbitrary: validMessages },
      {
        weight: 2,
        arbitrary: fc.array(
          fc.record(
            { role: fc.oneof(fc.constantFrom('user', 'assistant', 'system', 'tool', ''), weird), content: fc.oneof(fc.string(), weird) },
            { requiredKeys: [] },
          ),
          { maxLength: 3 },
        ),
      },
      { weight: 1, arbitrary: weird },
    ),
    stream: fc.oneof(fc.boolean(), weird),
    temperature: fc.oneof(fc.double({ min: -1, max: 3, noNaN: true }), fc.constantFrom(0, 2, 2.0000001, -0), weird),
    max_tokens: fc.oneof(fc.integer({ min: -2, max: CONTEXT_WINDOW + 2 }), fc.constantFrom(1, CONTEXT_WINDOW, 1.5, 2 ** 53), weird),
    max_completion_tokens: fc.oneof(fc.integer({ min: -2, max: CONTEXT_WINDOW + 2 }), weird),
    region: fc.oneof(fc.constantFrom('eu-west', 'mars-1', ''), weird),
    top_p: weird,
    tools: weird,
  },
  { requiredKeys: [] },
);

describe('request validation never crashes and never answers 5xx for client garbage', () => {
  it('any JSON value as the body: 400 invalid_json unless it is an object', async () => {
    await fc.assert(
      fc.asyncProperty(fc.jsonValue({ maxDepth: 4 }), async (value) => {
        const answer = await post(JSON.stringify(value));
        const error = expectClientError(answer);
        if (!isObject(value)) expect(error.code).toBe('invalid_json');
      }),
      { seed: SEED, numRuns: 150 },
    );
  });

  it('chat-shaped bodies with fields of any type and range: exactly the SPEC 2 answer', async () => {
    await fc.assert(
      fc.asyncProperty(chatShaped, async (body) => {
        await expectOracle(JSON.stringify(body));
      }),
      { seed: SEED, numRuns: 300 },
    );
  });

  it('prototype-pollution keys in the body and in messages pollute nothing and are forwarded as data', async () => {
    const pollution = fc.constantFrom(
      '"__proto__":{"polluted":"yes","model":"same"}',
      '"constructor":{"prototype":{"polluted":"yes"}}',
      '"__proto__":{"__proto__":{"polluted":"yes"}}',
      '"prototype":{"polluted":"yes"}',
      '"__proto__":null',
      '"hasOwnProperty":"x"',
    );
    await fc.assert(
      fc.asyncProperty(chatShaped, pollution, pollution, fc.boolean(), async (body, first, inMessage, atEnd) => {
        const json = JSON.stringify(body);
        let text = atEnd ? `${json.slice(0, -1)}${json === '{}' ? '' : ','}${first}}` : `{${first}${json === '{}' ? '' : ','}${json.slice(1)}`;
        // The same keys inside the first message, when there is one to put them in.
        text = text.replace('"messages":[{', `"messages":[{${inMessage},`);
        await expectOracle(text);
      }),
      { seed: SEED, numRuns: 150 },
    );
  });

  it('random bytes as the body: a 4xx OpenAI error', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 2048 }), async (bytes) => {
        expectClientError(await post(new Uint8Array(bytes)));
      }),
      { seed: SEED, numRuns: 150 },
    );
  });

  it('random Content-Type: 200 only for application/json (any case, any parameters), else 415', async () => {
    const body = JSON.stringify({ model: 'same', messages: [{ role: 'user', content: 'hi' }] });
    const contentType = fc.oneof(
      fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 60 }),
      fc.constantFrom(
        'application/json',
        'APPLICATION/JSON',
        'application/json; charset=utf-8',
        'Application/Json;charset=latin1',
        'application/json-patch+json',
        'application/jsonx',
        'text/json',
        'text/plain',
        'multipart/form-data; boundary=x',
        'application/x-www-form-urlencoded',
        'application/json, text/plain',
        ';application/json',
      ),
      fc.tuple(fc.constantFrom('application/json', 'text/plain'), fc.string({ maxLength: 20 })).map(([t, p]) => `${t};${p.replace(/[^\x20-\x7e]/g, '')}`),
    );
    await fc.assert(
      fc.asyncProperty(contentType, async (type) => {
        const answer = await post(body, { 'content-type': type });
        const essence = type.trim().split(';', 1)[0]!.trim().toLowerCase();
        if (essence === 'application/json') expectServed(answer, 'same', false);
        else expect(expectClientError(answer).code).toBe('unsupported_media_type');
      }),
      { seed: SEED, numRuns: 150 },
    );
  });

  it('unicode everywhere: any model id, role and content, served or refused by the SPEC 2 rules', async () => {
    const anyText = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 30 }),
      fc.string({ unit: 'grapheme-composite', maxLength: 30 }),
      fc.constantFrom('😀', '中文字', '\u0000', '\u2028', '\ud800', 'e\u0301', 'same\u0000', 'ｓａｍｅ'),
    );
    const body = fc.record({
      model: fc.oneof(fc.constantFrom(...MODELS), anyText),
      messages: fc.array(fc.record({ role: fc.oneof(fc.constantFrom('user', 'system'), anyText), content: anyText }), { minLength: 1, maxLength: 3 }),
    });
    await fc.assert(
      fc.asyncProperty(body, async (b) => {
        await expectOracle(JSON.stringify(b));
      }),
      { seed: SEED, numRuns: 150 },
    );
  });

  it('deep nesting within the body limit: refused where Sigil checks, forwarded where it does not', async () => {
    // Up to 120 000 levels: 840 KB for objects, under the 1 MiB body limit.
    const depth = fc.oneof(fc.integer({ min: 1, max: 64 }), fc.integer({ min: 1000, max: 120_000 }));
    const place = fc.constantFrom('body', 'model', 'messages', 'message', 'tool-content', 'extra', 'extra-renamed', 'extra-region', 'temperature');
    const shape = fc.constantFrom('array', 'object');
    await fc.assert(
      fc.asyncProperty(depth, place, shape, async (n, where, kind) => {
        const nested = kind === 'array' ? '['.repeat(n) + ']'.repeat(n) : '{"a":'.repeat(n) + '0' + '}'.repeat(n);
        const user = '{"role":"user","content":"hi"}';
        const text = {
          body: nested,
          model: `{"model":${nested},"messages":[${user}]}`,
          messages: `{"model":"same","messages":${nested}}`,
          message: `{"model":"same","messages":[${user},${nested}]}`,
          'tool-content': `{"model":"same","messages":[${user},{"role":"tool","content":${nested}}]}`,
          extra: `{"model":"same","messages":[${user}],"metadata":${nested}}`,
          // Edited in place (issue 11): a renamed model or a removed region no longer re-serialises the body.
          'extra-renamed': `{"model":"renamed","messages":[${user}],"metadata":${nested}}`,
          'extra-region': `{"model":"same","messages":[${user}],"metadata":${nested},"region":"eu-west"}`,
          temperature: `{"model":"same","messages":[${user}],"temperature":${nested}}`,
        }[where];
        const answer = await post(text);
        if (where === 'tool-content' || where === 'extra' || where === 'extra-region') expectServed(answer, 'same', false);
        else if (where === 'extra-renamed') expectServed(answer, 'renamed', false);
        else expectClientError(answer);
        if (where === 'body') expect(JSON.parse(answer.text).error.code).toBe(kind === 'array' ? 'invalid_json' : 'missing_required_parameter');
      }),
      { seed: SEED, numRuns: 40 },
    );
  });

  it('receipt headers with any value: a receipt flag other than true or false is 400 invalid_value naming the header, else a bad nonce is 400 invalid_nonce, else it is served', async () => {
    // Every byte HTTP allows in a header value (SP, VCHAR, obs-text); DEL is refused by Node's parser itself.
    const latin1 = fc.string({
      unit: fc
        .integer({ min: 0x20, max: 0xff })
        .filter((c) => c !== 0x7f)
        .map((c) => String.fromCharCode(c)),
      maxLength: 300,
    });
    const body = JSON.stringify({ model: 'same', messages: [{ role: 'user', content: 'hi' }] });
    await fc.assert(
      fc.asyncProperty(
        fc.option(latin1, { nil: undefined }),
        fc.oneof(fc.constantFrom('true', 'TRUE', ' true ', 'false', 'yes', ''), latin1),
        async (nonce, flag) => {
          const lines = [
            'POST /v1/chat/completions HTTP/1.1',
            'Host: 127.0.0.1',
            `Authorization: Bearer ${sigil.key}`,
            'Content-Type: application/json',
            `Content-Length: ${body.length}`,
            `X-Service-Receipt: ${flag}`,
            ...(nonce === undefined ? [] : [`X-Service-Nonce: ${nonce}`]),
            'Connection: close',
          ];
          const exchange = await rawRequest(sigil.url, [Buffer.from(`${lines.join('\r\n')}\r\n\r\n${body}`, 'latin1')], { waitMs: 2000 });
          const status = exchange.statuses[0];
          const answer = { status: status ?? 0, type: /\r\ncontent-type: ([^\r]*)/i.exec(exchange.text)?.[1] ?? '', text: firstBody(exchange) };
          // HTTP strips optional whitespace (SP, HTAB) around a header value; the rules apply to what remains.
          const ows = (v: string) => v.replace(/^[ \t]+|[ \t]+$/g, '');
          const wanted = ows(flag).toLowerCase();
          const sent = nonce === undefined ? undefined : ows(nonce);
          if (wanted !== 'true' && wanted !== 'false') {
            // The flag is read first: anything but true or false (any case) is refused, naming the header.
            expect(expectClientError(answer)).toMatchObject({
              code: 'invalid_value',
              param: 'x-service-receipt',
              message: 'The x-service-receipt header must be true or false.',
            });
          } else if (sent !== undefined && !/^[\x20-\x7e]{1,256}$/.test(sent)) expect(expectClientError(answer).code).toBe('invalid_nonce');
          else {
            expectServed(answer, 'same', false);
            expect(/\r\nx-service-receipt: /i.test(exchange.text)).toBe(wanted === 'true');
          }
        },
      ),
      { seed: SEED, numRuns: 150 },
    );
  });

  it('any method and path: never a 5xx, always an OpenAI error when refused', async () => {
    const segment = fc.oneof(
      fc.constantFrom(
        'v1',
        'chat',
        'completions',
        'models',
        'receipts',
        'verify',
        'jwks.json',
        'healthz',
        '..',
        '.',
        '%2e%2e',
        '%2F',
        '%',
        '%zz',
        '%00',
        'same',
        '',
      ),
      fc.string({ unit: fc.constantFrom(..."abcXYZ019-._~!$&'()*+,;=:@%"), maxLength: 12 }),
    );
    // An empty first segment makes `//host`-like targets, which once reached a 500.
    const path = fc.array(segment, { minLength: 1, maxLength: 5 }).map((s) => `/${s.join('/')}`);
    const query = fc.option(fc.string({ unit: fc.constantFrom(...'abc=&%?/detail=true=region'), maxLength: 20 }), { nil: undefined });
    const method = fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE', 'PROPFIND');
    await fc.assert(
      fc.asyncProperty(method, path, query, async (m, p, q) => {
        const target = q === undefined ? p : `${p}?${q}`;
        const request = `${m} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${sigil.key}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`;
        const exchange = await rawRequest(sigil.url, [request], { waitMs: 2000 });
        expect(exchange.statuses.length, `${m} ${target}: ${exchange.text}`).toBe(1);
        const status = exchange.statuses[0]!;
        expect(status, `${m} ${target}`).toBeLessThan(500);
        if (status >= 400 && m !== 'HEAD') {
          const body = exchange.text.slice(exchange.text.indexOf('\r\n\r\n') + 4);
          expect(Object.keys(JSON.parse(body).error).sort()).toEqual(['code', 'message', 'param', 'type']);
        }
      }),
      { seed: SEED, numRuns: 150 },
    );
  });
});
