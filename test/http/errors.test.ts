import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

let engine: TestEngine;
let usEngine: TestEngine;
let sigil: TestSigil;
let down: TestSigil;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m', 'small'] });
  usEngine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({
    upstreams: { eu: { url: engine.baseUrl, region: 'eu-west' }, us: { url: usEngine.baseUrl, region: 'us-east' } },
    models: [
      { id: 'm', regions: ['eu-west', 'us-east'] },
      { id: 'small', context_window: 100, upstream: 'eu', regions: ['eu-west'] },
    ],
    config: { limits: { max_body_bytes: 2048 }, routing: { strict_regions: true } },
  });
  // Nothing listens on port 9 of loopback: the engine is down.
  down = await startTestSigil({ upstreams: { gone: { url: 'http://127.0.0.1:9/v1' } }, models: [{ id: 'm' }] });
});

afterAll(async () => {
  await Promise.all([sigil.close(), down.close()]);
  await engine.close();
  await usEngine.close();
});

const ok = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };

async function call(options: { body?: unknown; headers?: Record<string, string>; method?: string; path?: string; target?: TestSigil } = {}) {
  const target = options.target ?? sigil;
  const body = options.body === undefined ? JSON.stringify(ok) : typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
  const res = await fetch(`${target.url}${options.path ?? '/v1/chat/completions'}`, {
    method: options.method ?? 'POST',
    headers: { authorization: `Bearer ${target.key}`, 'content-type': 'application/json', ...options.headers },
    ...(options.method === 'GET' ? {} : { body }),
  });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

const error = (type: string, code: string, message: string, param: string | null = null) => ({ error: { message, type, param, code } });

describe('every error is OpenAI-shaped, with a fitting status, and nothing reaches the engine', () => {
  const cases: Array<[string, Parameters<typeof call>[0], number, ReturnType<typeof error>]> = [
    ['a body that is not JSON', { body: '{"model":' }, 400, error('invalid_request_error', 'invalid_json', 'The request body is not valid JSON.')],
    ['a JSON array body', { body: '[]' }, 400, error('invalid_request_error', 'invalid_json', 'The request body must be a JSON object.')],
    [
      'no model',
      { body: { messages: ok.messages } },
      400,
      error('invalid_request_error', 'missing_required_parameter', "Missing required parameter: 'model'.", 'model'),
    ],
    ['a model that is not a string', { body: { ...ok, model: 7 } }, 400, error('invalid_request_error', 'invalid_value', "'model' must be a string.", 'model')],
    [
      'no messages',
      { body: { model: 'm' } },
      400,
      error('invalid_request_error', 'missing_required_parameter', "Missing required parameter: 'messages'.", 'messages'),
    ],
    [
      'empty messages',
      { body: { ...ok, messages: [] } },
      400,
      error('invalid_request_error', 'invalid_value', "'messages' must be a non-empty array.", 'messages'),
    ],
    [
      'a message without role',
      { body: { ...ok, messages: [{ content: 'x' }] } },
      400,
      error('invalid_request_error', 'invalid_value', "'messages[0].role' must be a non-empty string.", 'messages[0].role'),
    ],
    [
      'a user message with numeric content',
      { body: { ...ok, messages: [{ role: 'user', content: 5 }] } },
      400,
      error('invalid_request_error', 'invalid_value', "'messages[0].content' must be a string.", 'messages[0].content'),
    ],
    [
      'a message that is a string',
      { body: { ...ok, messages: ['hi'] } },
      400,
      error('invalid_request_error', 'invalid_value', "'messages[0]' must be an object with 'role' and 'content'.", 'messages[0]'),
    ],
    [
      'stream that is not a boolean',
      { body: { ...ok, stream: 'yes' } },
      400,
      error('invalid_request_error', 'invalid_value', "'stream' must be a boolean.", 'stream'),
    ],
    [
      'temperature above 2',
      { body: { ...ok, temperature: 2.5 } },
      400,
      error('invalid_request_error', 'invalid_value', "'temperature' must be a number from 0 to 2.", 'temperature'),
    ],
    [
      'negative temperature',
      { body: { ...ok, temperature: -0.1 } },
      400,
      error('invalid_request_error', 'invalid_value', "'temperature' must be a number from 0 to 2.", 'temperature'),
    ],
    [
      'max_tokens of 0',
      { body: { ...ok, max_tokens: 0 } },
      400,
      error('invalid_request_error', 'invalid_value', "'max_tokens' must be a positive integer.", 'max_tokens'),
    ],
    [
      'fractional max_tokens',
      { body: { ...ok, max_tokens: 1.5 } },
      400,
      error('invalid_request_error', 'invalid_value', "'max_tokens' must be a positive integer.", 'max_tokens'),
    ],
    [
      'max_tokens over the context window',
      { body: { ...ok, model: 'small', max_tokens: 101 } },
      400,
      error('invalid_request_error', 'invalid_value', "'max_tokens' is 101, more than the 100-token context window of 'small'.", 'max_tokens'),
    ],
    [
      'a region the model is not served in, with strict regions',
      { body: { ...ok, model: 'small', region: 'us-east' } },
      400,
      error('invalid_request_error', 'region_unavailable', "The model 'small' is not served in region 'us-east'.", 'region'),
    ],
    [
      'no API key',
      { headers: { authorization: '' } },
      401,
      error('authentication_error', 'missing_api_key', "You didn't provide an API key. Send it as 'Authorization: Bearer <key>' or 'x-api-key: <key>'."),
    ],
    [
      'an unknown API key',
      { headers: { authorization: 'Bearer sk-sigil-not-a-real-key' } },
      401,
      error('authentication_error', 'invalid_api_key', 'Incorrect API key provided.'),
    ],
    [
      'a Basic Authorization header',
      { headers: { authorization: 'Basic dXNlcjpwYXNz' } },
      401,
      error('authentication_error', 'invalid_api_key', "The Authorization header must be 'Bearer <key>'."),
    ],
    [
      'an unknown model',
      { body: { ...ok, model: 'gpt-9' } },
      404,
      error('invalid_request_error', 'model_not_found', "The model 'gpt-9' does not exist or you do not have access to it.", 'model'),
    ],
    ['an unknown route', { path: '/v1/audio/speech' }, 404, error('invalid_request_error', 'not_found', 'No route for POST /v1/audio/speech.')],
    [
      'a body over max_body_bytes',
      { body: { ...ok, messages: [{ role: 'user', content: 'x'.repeat(3000) }] } },
      413,
      error('invalid_request_error', 'request_too_large', 'The request body is larger than 2048 bytes.'),
    ],
    [
      'a body that is not declared JSON',
      { headers: { 'content-type': 'text/plain' } },
      415,
      error('invalid_request_error', 'unsupported_media_type', "The request body must be JSON, sent with 'Content-Type: application/json'."),
    ],
  ];

  it.each(cases)('%s', async (_name, options, status, body) => {
    const before = engine.requests.length;
    const res = await call(options);
    expect(res.status).toBe(status);
    expect(res.body).toEqual(body);
    expect(engine.requests.length).toBe(before);
  });

  it.each(['//:/v1', '//[', 'http://[', '//evil/healthz', '/v1/../healthz'])('answers 404 to the odd request target %s', async (target) => {
    const { request } = await import('node:http');
    const url = new URL(sigil.url);
    const status = await new Promise<number>((resolve, reject) => {
      request({ host: url.hostname, port: url.port, method: 'GET', path: target }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      })
        .on('error', reject)
        .end();
    });
    expect(status).toBe(404);
  });

  it('serves an absolute-form request target by its path', async () => {
    const { request } = await import('node:http');
    const url = new URL(sigil.url);
    const body = await new Promise<string>((resolve, reject) => {
      request({ host: url.hostname, port: url.port, method: 'GET', path: 'http://127.0.0.2:1/v1/models/m' }, (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve(text));
      })
        .on('error', reject)
        .end();
    });
    expect(JSON.parse(body).id).toBe('m');
  });

  it('never echoes the API key, not even hashed', async () => {
    const key = 'sk-sigil-leak-check-0123456789';
    const res = await call({ headers: { authorization: `Bearer ${key}` } });
    expect(JSON.stringify(res.body)).not.toContain('leak-check');
  });

  it('answers 405 with Allow for a wrong method', async () => {
    const res = await call({ method: 'GET' });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('POST');
    expect(res.body).toEqual(error('invalid_request_error', 'method_not_allowed', 'Method GET is not allowed on /v1/chat/completions; use POST.'));
    const del = await call({ method: 'DELETE', path: '/v1/models' });
    expect(del.status).toBe(405);
    expect(del.headers.get('allow')).toBe('GET, HEAD');
  });

  it('answers 502 upstream_unreachable when the engine is down', async () => {
    const res = await call({ target: down });
    expect(res.status).toBe(502);
    expect(res.body).toEqual(error('upstream_error', 'upstream_unreachable', 'The engine could not be reached.'));
  });

  it('answers 503 from /readyz when the engine is down, 200 when it is up', async () => {
    const notReady = await fetch(`${down.url}/readyz`);
    expect(notReady.status).toBe(503);
    expect(await notReady.json()).toEqual(
      error('service_unavailable', 'not_ready', 'Not ready: waiting for engine `gone` at http://127.0.0.1:9/v1: connection refused (ECONNREFUSED).'),
    );
    const ready = await fetch(`${sigil.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', keys_loaded: true, engines: { eu: true, us: true } });
    expect(await (await fetch(`${down.url}/healthz`)).json()).toEqual({ status: 'ok' });
  });
});

describe('regions', () => {
  it('picks the upstream in the preferred region and strips the field', async () => {
    const eu = engine.requests.length;
    const res = await call({ body: { ...ok, region: 'us-east' } });
    expect(res.status).toBe(200);
    expect(engine.requests.length).toBe(eu);
    expect(JSON.parse(usEngine.requests.at(-1)!.body.toString())).toEqual(ok);
  });

  it('uses the first upstream without a region preference', async () => {
    const us = usEngine.requests.length;
    expect((await call()).status).toBe(200);
    expect(usEngine.requests.length).toBe(us);
    expect(JSON.parse(engine.requests.at(-1)!.body.toString())).toEqual(ok);
  });
});
