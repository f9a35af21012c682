import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startConnect, type RunningConnect } from '../../src/connect/start.ts';
import { FORGED_COMPLETION, startForgingProxy, type ForgingProxy } from '../support/forging-proxy.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** sigil connect (docs/connect.md) in front of a real Sigil with TLS in the enclave and sealed bodies, with the official openai client. */
let engine: TestEngine;
let sigil: TestSigil;
let connect: RunningConnect;
let client: OpenAI;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m', 'embed'] });
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'm' }, { id: 'embed', endpoints: ['embeddings'] }],
    config: { tls: { mode: 'self-signed', hostnames: ['localhost'] } },
  });
  connect = await startConnect({ service: sigil.url.replace('127.0.0.1', 'localhost'), listen: { host: '127.0.0.1', port: 0 }, allowNoTee: true });
  client = new OpenAI({ baseURL: `${connect.url}/v1`, apiKey: sigil.key, maxRetries: 0 });
});

afterAll(async () => {
  await connect.close();
  await sigil.close(0);
  await engine.close();
});

const lastReceipt = () => connect.fetch.receipts.at(-1)!;

describe('sigil connect with the official openai client', () => {
  it('relays a JSON completion whose receipt verified, the body sealed on the way and the API key passed through', async () => {
    const before = connect.status().receipts.verified;
    const completion = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hello there' }] });
    expect(completion.choices[0]?.message.content).toBe(engine.reply);
    expect(lastReceipt()).toMatchObject({ path: '/v1/chat/completions', stream: false, ok: true });
    expect(connect.status().receipts.verified).toBe(before + 1);
    const seen = engine.requests.at(-1)!;
    expect(JSON.parse(seen.body.toString()).messages).toEqual([{ role: 'user', content: 'hello there' }]);
    // The app's key went through (Sigil accepted it) and the attested client sealed the body: the receipt says so.
    expect(connect.fetch.attestation.hpkeKeyConfig).not.toBeNull();
    expect(connect.fetch.attestation.tlsSpkiSha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it('relays a stream chunk by chunk, ending with [DONE] once its receipt verified', async () => {
    const stream = await client.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'one two three' }] });
    const deltas: string[] = [];
    for await (const chunk of stream) if (chunk.choices[0]?.delta?.content) deltas.push(chunk.choices[0].delta.content);
    expect(deltas).toEqual(engine.reply.split(/(?<= )/));
    expect(lastReceipt()).toMatchObject({ stream: true, ok: true });
    const raw = await fetch(`${connect.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'raw' }] }),
    });
    const text = await raw.text();
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(text).not.toContain(': receipt ');
  });

  it('passes tools to the engine as sent, and verifies the answer', async () => {
    const weather = {
      type: 'function' as const,
      function: { name: 'weather', description: 'the weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
    };
    const completion = await client.chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'weather in Paris?' }],
      tools: [weather],
      tool_choice: 'auto',
    });
    expect(completion.object).toBe('chat.completion');
    expect(JSON.parse(engine.requests.at(-1)!.body.toString()).tools).toEqual([weather]);
    expect(lastReceipt()).toMatchObject({ ok: true });
  });

  it('relays embeddings with a verified receipt', async () => {
    const result = await client.embeddings.create({ model: 'embed', input: ['alpha', 'beta'] });
    expect(result.data).toHaveLength(2);
    expect(lastReceipt()).toMatchObject({ path: '/v1/embeddings', ok: true });
  });

  it("honours the app's own X-Service-Nonce: the receipt carries it", async () => {
    await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'mine' }] }, { headers: { 'X-Service-Nonce': 'nr-abc' } });
    expect(lastReceipt()).toMatchObject({ ok: true, claims: { nonce: 'nr-abc' } });
  });

  it("passes the service's own refusal on as it is: a wrong API key is Sigil's 401", async () => {
    const wrong = new OpenAI({ baseURL: `${connect.url}/v1`, apiKey: 'sk-wrong', maxRetries: 0 });
    const error = await wrong.chat.completions
      .create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((error as InstanceType<typeof OpenAI.APIError>).code).toBe('invalid_api_key');
    // Sent before the sealed body was opened, so not sealed; but over TLS pinned to the enclave, so not marked.
    expect((error as InstanceType<typeof OpenAI.APIError>).headers?.get('x-attested-fetch-unverified')).toBeNull();
  });

  it('answers a path outside /v1 with an OpenAI-shaped 404', async () => {
    const answer = await fetch(`${connect.url}/admin`);
    expect(answer.status).toBe(404);
    expect(((await answer.json()) as { error: { code: string } }).error.code).toBe('not_found');
  });
});

describe('the status page', () => {
  it('GET /status says the verdict in the trust page words, each check, and the receipts seen', async () => {
    const status = (await (await fetch(`${connect.url}/status`)).json()) as ReturnType<RunningConnect['status']>;
    expect(status.verdict).toMatchObject({
      headline: 'development',
      text: 'Development service: no confidential hardware. Do not send anything private.',
      outcome: 'verified-with-waivers',
    });
    expect(status.checks.map((c) => `${c.result} ${c.name}`)).toContain('PASS attestation.tls_key');
    expect(status.checks.find((c) => c.name === 'attestation.tee')).toMatchObject({ result: 'WAIVED', title: 'Hardware enclave' });
    expect(status.bodies).toBe('sealed (EHBP)');
    expect(status.tls).toBe('pinned to the attested key');
    expect(status.receipts.failed).toBe(0);
    expect(status.receipts.verified).toBeGreaterThanOrEqual(5);
    expect(status.receipts.recent.at(-1)).toMatchObject({ ok: true, model: 'm', failed: [] });
  });

  it('GET / shows the same to a person', async () => {
    const answer = await fetch(`${connect.url}/`);
    expect(answer.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const html = await answer.text();
    expect(html).toContain('<h1 class="fail">Development service: no confidential hardware. Do not send anything private.</h1>');
    expect(html).toContain('<code>attestation.hpke_key</code>');
    expect(html).toMatch(/\d+ verified, 0 failed since connect started/);
  });
});

describe('behind a forging load balancer between connect and Sigil, the app gets an error, never the forgery', () => {
  let balancer: ForgingProxy;
  let behind: RunningConnect;
  let app: OpenAI;
  beforeAll(async () => {
    balancer = await startForgingProxy(sigil.url, { tls: true });
    behind = await startConnect({ service: balancer.url, listen: { host: '127.0.0.1', port: 0 }, allowNoTee: true, ca: balancer.certificate! });
    app = new OpenAI({ baseURL: `${behind.url}/v1`, apiKey: sigil.key, maxRetries: 0 });
  });
  afterAll(async () => {
    await behind.close();
    await balancer.close();
  });
  const apiError = (promise: Promise<unknown>) =>
    promise.then(
      () => undefined,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );

  it('works through the balancer while it forges nothing: bodies sealed, TLS ending before the enclave', async () => {
    const completion = await app.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'through the balancer' }] });
    expect(completion.choices[0]?.message.content).toBe(engine.reply);
    expect(behind.status().tls).toBe('not ending in the enclave (bodies sealed instead)');
  });

  it('a model list the balancer rewrites: the app gets the models the attested policy names, never the forgery', async () => {
    const forged = { object: 'list', data: [{ id: 'forged-model', object: 'model', created: 1, owned_by: 'x' }] };
    balancer.forge = (method, path) =>
      method === 'GET' && path.startsWith('/v1/models')
        ? { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify(forged) }
        : undefined;
    try {
      const before = balancer.forged;
      const policy = behind.fetch.attestation.policy as { models: Array<{ id: string; provider: string }> };
      const listed = await app.models.list();
      expect(listed.data).toEqual(policy.models.map((m) => ({ id: m.id, object: 'model', created: 0, owned_by: m.provider })));
      expect(listed.data.map((m) => m.id)).toEqual(['m', 'embed']);
      await expect(app.models.retrieve('forged-model')).rejects.toMatchObject({ status: 404, code: 'model_not_found' });
      expect((await app.models.retrieve('m')).id).toBe('m');
      expect(balancer.forged).toBe(before);
    } finally {
      balancer.forge = () => undefined;
    }
  });

  it("passes the service's 401 on, marked as not authenticated: TLS ends before the enclave and it was not sealed", async () => {
    const wrong = new OpenAI({ baseURL: `${behind.url}/v1`, apiKey: 'sk-wrong', maxRetries: 0 });
    const error = await apiError(wrong.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }));
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(error?.headers?.get('x-attested-fetch-unverified')).toMatch(/^this answer was neither sealed/);
  });

  it('a 203 with a made-up completion: 502 response_not_sealed', async () => {
    balancer.forge = (method, path) =>
      method === 'POST' && path === '/v1/chat/completions'
        ? { status: 203, headers: { 'content-type': 'application/json' }, body: FORGED_COMPLETION }
        : undefined;
    try {
      const error = await apiError(app.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }));
      expect(error).toBeInstanceOf(OpenAI.APIError);
      expect(error?.status).toBe(502);
      expect(error?.code).toBe('response_not_sealed');
      expect(error?.type).toBe('verification_error');
      expect(error?.message).not.toContain('forged answer');
    } finally {
      balancer.reset();
    }
  });

  it('a stripped response nonce: 502 response_not_sealed, for a stream too', async () => {
    balancer.dropAnswerHeaders = ['ehbp-response-nonce'];
    try {
      const error = await apiError(app.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }));
      expect(error?.status).toBe(502);
      expect(error?.code).toBe('response_not_sealed');
      const streamError = await apiError(app.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] }));
      expect(streamError?.status).toBe(502);
      expect(streamError?.code).toBe('response_not_sealed');
    } finally {
      balancer.reset();
    }
  });

  it('a stream cut before its receipt: the events that arrived, then an error event instead of [DONE]', async () => {
    // Keep every sealed frame but the last two: the end of the stream and its receipt never arrive.
    balancer.rewrite = (method, path) =>
      method === 'POST' && path === '/v1/chat/completions'
        ? (body) => {
            const ends: number[] = [];
            for (let at = 0; at + 4 <= body.length; at += 4 + body.readUInt32BE(at)) ends.push(at);
            return body.subarray(0, ends.at(-2));
          }
        : undefined;
    try {
      const raw = await fetch(`${behind.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'cut me' }] }),
      });
      expect(raw.status).toBe(200);
      const text = await raw.text();
      expect(text).not.toContain('[DONE]');
      const last = text.trimEnd().split('\n\n').at(-1)!;
      const error = (JSON.parse(last.slice('data: '.length)) as { error: { code: string; param: string; type: string } }).error;
      expect(error).toMatchObject({ code: 'receipt_verification_failed', type: 'verification_error', param: 'receipt.present' });
      const stream = await app.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'cut me' }] });
      const refused = await apiError(
        (async () => {
          for await (const chunk of stream) void chunk;
        })(),
      );
      expect(refused).toBeInstanceOf(OpenAI.APIError);
      expect(refused?.message).toBe(
        'sigil connect did not pass this answer on: the stream\'s receipt did not verify: the stream carries no ": receipt <JWS>" comment',
      );
      expect(behind.status().receipts.failed).toBe(2);
    } finally {
      balancer.reset();
    }
  });
});

describe('a service restarted with new keys behind sigil connect', () => {
  it('is attested again, and the app goes on without noticing: its next answer verified against the new keys', async () => {
    const first = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
    const port = Number(new URL(first.url).port);
    const local = await startConnect({ service: first.url, listen: { host: '127.0.0.1', port: 0 }, allowNoTee: true, allowInsecureHttp: true });
    let second: TestSigil | undefined;
    try {
      const before = local.status();
      await first.close(0);
      second = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }], config: { listen: { host: '127.0.0.1', port } } });
      const app = new OpenAI({ baseURL: `${local.url}/v1`, apiKey: second.key, maxRetries: 0 });
      const completion = await app.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'after the restart' }] });
      expect(completion.choices[0]?.message.content).toBe(engine.reply);
      const after = local.status();
      expect(after.attested_at).not.toBe(before.attested_at);
      expect(after.receipts).toMatchObject({ verified: 1, failed: 0 });
      expect(after.tls).toBe('plain HTTP');
    } finally {
      await local.close();
      await second?.close(0);
    }
  });
});

describe('sigil connect and other pages', () => {
  it('answers only requests addressed to a loopback name: a rebound DNS name cannot read the status', async () => {
    const { request } = await import('node:http');
    const port = Number(new URL(connect.url).port);
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path: '/status', headers: { host: `attacker.example:${port}` } }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.end();
    });
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body)).toMatchObject({ error: { code: 'invalid_value', param: 'Host' } });
    expect((await fetch(`http://localhost:${port}/status`)).status).toBe(200);
  });

  it('stops the service stream when the app goes away mid-stream', async () => {
    engine.behaviour = { chunkDelayMs: 20 };
    try {
      const aborted = engine.nextAbort();
      const controller = new AbortController();
      const answer = await fetch(`${connect.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'long' }] }),
        signal: controller.signal,
      });
      const reader = answer.body!.getReader();
      await reader.read();
      controller.abort();
      await aborted;
    } finally {
      engine.behaviour = {};
    }
  });
});

describe('a development service without sealed bodies, behind a proxy that rewrites answers', () => {
  let plain: TestSigil;
  let rewriter: ForgingProxy;
  let local: RunningConnect;
  let app: OpenAI;
  beforeAll(async () => {
    plain = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }], config: { ehbp: { enabled: false } } });
    rewriter = await startForgingProxy(plain.url);
    local = await startConnect({
      service: rewriter.url,
      listen: { host: '127.0.0.1', port: 0 },
      allowNoTee: true,
      allowInsecureHttp: true,
      allowUnsealedBodies: true,
    });
    app = new OpenAI({ baseURL: `${local.url}/v1`, apiKey: plain.key, maxRetries: 0 });
  });
  afterAll(async () => {
    await local.close();
    await rewriter.close();
    await plain.close(0);
  });
  const rewriteAnswers = () => {
    rewriter.rewrite = (method, path) =>
      method === 'POST' && path === '/v1/chat/completions' ? (body) => Buffer.from(body.toString('utf8').replace('Hello', 'Howdy')) : undefined;
  };

  it('a JSON answer changed on the way: 502 naming receipt.response_hash, never the changed answer', async () => {
    rewriteAnswers();
    try {
      const error = await app.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }).then(
        () => undefined,
        (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
      );
      expect(error?.status).toBe(502);
      expect(error?.code).toBe('receipt_verification_failed');
      expect(error?.param).toBe('receipt.response_hash');
      expect(error?.message).not.toContain('Howdy');
      expect(local.status().receipts.recent.at(-1)).toMatchObject({ ok: false, failed: ['receipt.response_hash'] });
    } finally {
      rewriter.reset();
    }
  });

  it('a stream changed on the way: the events arrive, then an error event naming receipt.response_hash instead of [DONE]', async () => {
    rewriteAnswers();
    try {
      const raw = await fetch(`${local.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${plain.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      });
      const text = await raw.text();
      expect(text).not.toContain('[DONE]');
      const last = text.trimEnd().split('\n\n').at(-1)!;
      expect(JSON.parse(last.slice('data: '.length))).toMatchObject({ error: { code: 'receipt_verification_failed', param: 'receipt.response_hash' } });
    } finally {
      rewriter.reset();
    }
  });

  it("refuses, before sending, an app's nonce the service would refuse: 400 invalid_nonce", async () => {
    const before = engine.requests.length;
    const error = await app.chat.completions
      .create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }, { headers: { 'X-Service-Nonce': 'x'.repeat(300) } })
      .then(
        () => undefined,
        (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
      );
    expect(error?.status).toBe(400);
    expect(error?.code).toBe('invalid_nonce');
    expect(engine.requests.length).toBe(before);
  });
});
