import { randomBytes } from 'node:crypto';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { Socket } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttestedFetch, SOURCE_HEADER, UNVERIFIED_HEADER, type AttestedFetch } from '../../src/client/index.ts';
import { checkMark } from '../../src/verify/check.ts';
import type { ReferenceValues } from '../../src/verify/reference/reference-values.ts';
import { FORGED_COMPLETION, startForgingProxy, type ForgingProxy } from '../support/forging-proxy.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { requestLines, startTestSigil, type TestSigil } from '../support/sigil.ts';
import { startTlsMitm, type TlsMitm } from '../support/tls-mitm.ts';
import { createAmdTestChain, pinnedSnpReference, type AmdTestChain } from '../support/evidence-fixtures.ts';
import { startSnpSigil, type TeeSigil } from '../support/tee-sigil.ts';
import { waitFor } from '../support/wait-for.ts';

/** The attested client (docs/tls.md, "The attested client"), with the official openai package, and a man in the middle it refuses. */
let engine: TestEngine;
/** TLS in the enclave and encrypted bodies (the defaults with TLS on); and TLS alone. */
let sigil: TestSigil;
let tlsOnly: TestSigil;
let mitm: TlsMitm;
let ehbpMitm: TlsMitm;
const PROMPT = 'the secret prompt 7f3a9c';
const FORGED_STREAM = `data: ${JSON.stringify({ id: 'chatcmpl-forged', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: 'forged answer' }, finish_reason: null }] })}\n\ndata: [DONE]\n\n`;
type Refusal = Error & { cause?: { code?: string; message?: string } };
const refusalOf = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (e: unknown) => e as Refusal,
  );

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  sigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'm' }],
    config: { tls: { mode: 'self-signed', hostnames: ['localhost'] } },
  });
  tlsOnly = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'm' }],
    config: { tls: { mode: 'self-signed', hostnames: ['localhost'] }, ehbp: { enabled: false } },
  });
  mitm = await startTlsMitm({ host: '127.0.0.1', port: Number(new URL(tlsOnly.url).port) });
  ehbpMitm = await startTlsMitm({ host: '127.0.0.1', port: Number(new URL(sigil.url).port) });
});

afterAll(async () => {
  await mitm.close();
  await ehbpMitm.close();
  await sigil.close(0);
  await tlsOnly.close(0);
  await engine.close();
});

const sigilUrl = () => sigil.url.replace('127.0.0.1', 'localhost');
const chatRequests = () => engine.requests.filter((r) => r.path === '/v1/chat/completions').length;

describe('createAttestedFetch with the openai client', () => {
  let attested: AttestedFetch;
  let client: OpenAI;
  beforeAll(async () => {
    attested = await createAttestedFetch({ baseURL: `${sigilUrl()}/v1`, allowNoTee: true });
    client = new OpenAI({ baseURL: `${sigilUrl()}/v1`, apiKey: sigil.key, maxRetries: 0, fetch: attested as unknown as typeof fetch });
  });
  afterAll(async () => attested.close());

  it('attests before the first request: the TLS key, the binding, the signed nonce, the policy, all named', () => {
    const names = attested.attestation.checks.map((c) => `${checkMark(c)} ${c.name}`);
    expect(names).toEqual([
      'PASS attestation.tls_key',
      'PASS attestation.hpke_key',
      'PASS attestation.ohttp_key',
      'WAIVED attestation.tee',
      'PASS attestation.nonce',
      'PASS attestation.report_data',
      'PASS attestation.jwks',
      'WAIVED attestation.manifest',
      'PASS attestation.signed_nonce',
      'PASS gpu.evidence',
      'PASS attestation.policy',
    ]);
    expect(attested.attestation.verdict.summary).toBe('verified with waivers: 9 checks passed; 2 waived (attestation.tee, attestation.manifest)');
    expect(attested.attestation.tlsSpkiSha256).toMatch(/^[0-9a-f]{64}$/);
    expect(attested.attestation.checks[0]!.detail).toContain(`sha256:${attested.attestation.tlsSpkiSha256}, the key the enclave attests`);
  });

  it('verifies the receipt of a JSON completion over the exact bytes', async () => {
    const completion = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hello there' }] });
    expect(completion.object).toBe('chat.completion');
    const last = attested.receipts.at(-1)!;
    expect(last).toMatchObject({ path: '/v1/chat/completions', stream: false, ok: true });
    expect(last.checks.filter((c) => checkMark(c) !== 'PASS').map((c) => `${checkMark(c)} ${c.name}`)).toEqual(['WAIVED receipt.tee']);
    expect(last.checks.map((c) => c.name)).toEqual(
      expect.arrayContaining([
        'receipt.signature',
        'receipt.nonce',
        'receipt.request_hash',
        'receipt.response_hash',
        'receipt.measurement',
        'receipt.policy_hash',
      ]),
    );
    expect(last.claims?.receipt_type).toBe('message');
  });

  it('passes a stream through chunk by chunk and verifies its receipt at the end', async () => {
    const stream = await client.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'one two three four' }] });
    const deltas: string[] = [];
    for await (const chunk of stream) if (chunk.choices[0]?.delta?.content) deltas.push(chunk.choices[0].delta.content);
    // One SDK chunk per engine chunk, in order: nothing merged or split on the way.
    expect(deltas).toEqual(engine.reply.split(/(?<= )/));
    expect(deltas.length).toBeGreaterThan(1);
    const last = attested.receipts.at(-1)!;
    expect(last).toMatchObject({ path: '/v1/chat/completions', stream: true, ok: true });
    expect(last.checks.find((c) => c.name === 'receipt.response_hash')?.ok).toBe(true);
  });

  it("honours the app's own X-Service-Nonce under EHBP: the header is sent as given and the receipt must carry it", async () => {
    const before = engine.requests.length;
    const completion = await client.chat.completions.create(
      { model: 'm', messages: [{ role: 'user', content: 'with my own nonce' }] },
      { headers: { 'X-Service-Nonce': 'nr-abc' } },
    );
    expect(completion.object).toBe('chat.completion');
    expect(engine.requests.length).toBe(before + 1);
    const last = attested.receipts.at(-1)!;
    expect(last).toMatchObject({ path: '/v1/chat/completions', ok: true });
    expect(last.claims?.nonce).toBe('nr-abc');
    expect(last.checks.find((c) => c.name === 'receipt.nonce')?.ok).toBe(true);
    const stream = await client.chat.completions.create(
      { model: 'm', stream: true, messages: [{ role: 'user', content: 'streamed with my own nonce' }] },
      { headers: { 'X-Service-Nonce': 'nr-def' } },
    );
    for await (const chunk of stream) void chunk;
    expect(attested.receipts.at(-1)).toMatchObject({ stream: true, ok: true, claims: { nonce: 'nr-def' } });
  });

  it('refuses, before sending, a nonce header the service would refuse', async () => {
    const before = engine.requests.length;
    const refused = await refusalOf(
      client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: PROMPT }] }, { headers: { 'X-Service-Nonce': 'é' } }),
    );
    expect(refused).toBeInstanceOf(OpenAI.APIConnectionError);
    expect(refused?.cause?.code).toBe('ERR_VERIFY_NONCE');
    expect(refused?.cause?.message).toBe(
      'the x-service-nonce header must be 1 to 256 printable ASCII characters (the service would refuse it); nothing was sent',
    );
    expect(engine.requests.length).toBe(before);
  });

  it('fails a request whose receipt does not verify, and reports it', async () => {
    const reporting = await createAttestedFetch({ baseURL: `${sigilUrl()}/v1`, allowNoTee: true, brand: 'Other' });
    try {
      const strict = new OpenAI({ baseURL: `${sigilUrl()}/v1`, apiKey: sigil.key, maxRetries: 0, fetch: reporting as unknown as typeof fetch });
      // Sigil's brand is Service: a client expecting X-Other-Receipt finds no receipt on the response.
      const error = await strict.chat.completions
        .create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })
        .catch((e: unknown) => e as Error & { cause?: Error });
      // The openai client wraps what fetch threw as a connection error; the cause says why.
      expect(error).toBeInstanceOf(OpenAI.APIConnectionError);
      expect((error as { cause?: Error }).cause?.message).toBe("the response's receipt did not verify: the response carries no receipt header");
      expect(reporting.receipts.at(-1)).toMatchObject({ ok: false, problem: 'the response carries no receipt header' });
    } finally {
      await reporting.close();
    }
  });
});

describe('a TLS man in the middle, with encrypted bodies (EHBP)', () => {
  it('carries only ciphertext: the client accepts it as a mere TLS terminator, and neither prompt nor answer is readable to it', async () => {
    ehbpMitm.setMode('intercept');
    // Its certificate trusted as a load balancer's would be: the web's checks pass, the enclave's do not apply.
    const attested = await createAttestedFetch({ baseURL: `${ehbpMitm.url}/v1`, allowNoTee: true, ca: ehbpMitm.certificate });
    try {
      const tlsKey = attested.attestation.checks.find((c) => c.name === 'attestation.tls_key')!;
      expect(checkMark(tlsKey)).toBe('WAIVED');
      expect(tlsKey.detail).toMatch(
        /^the server presented TLS key sha256:[0-9a-f]{64} but the enclave attests sha256:[0-9a-f]{64}: something between you and the enclave terminates TLS/,
      );
      expect(tlsKey.waived).toMatch(/^every request body is sealed to the attested HPKE key/);
      const client = new OpenAI({ baseURL: `${ehbpMitm.url}/v1`, apiKey: sigil.key, maxRetries: 0, fetch: attested as unknown as typeof fetch });
      const completion = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: PROMPT }] });
      expect(attested.receipts.at(-1)).toMatchObject({ ok: true, stream: false });
      const stream = await client.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: PROMPT }] });
      let streamed = '';
      for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? '';
      expect(attested.receipts.at(-1)).toMatchObject({ ok: true, stream: true });
      expect(ehbpMitm.seen()).toContain('POST /v1/chat/completions');
      expect(ehbpMitm.seen()).toContain('ehbp-encapsulated-key');
      expect(ehbpMitm.seen()).not.toContain(PROMPT);
      const answer = completion.choices[0]!.message.content!;
      expect(answer.length).toBeGreaterThan(0);
      expect(ehbpMitm.seenFromServer()).not.toContain(answer);
      expect(ehbpMitm.seenFromServer()).not.toContain('chat.completion');
      expect(streamed.length).toBeGreaterThan(0);
    } finally {
      await attested.close();
    }
  });
});

describe('a TLS man in the middle (TLS alone, no encrypted bodies)', () => {
  it('is refused before the first request: the attestation names another key, and the prompt never leaves the client', async () => {
    mitm.setMode('intercept');
    const before = chatRequests();
    const error = await createAttestedFetch({ baseURL: `${mitm.url}/v1`, allowNoTee: true }).catch((e: unknown) => e as Error);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(
      new RegExp(`attestation.tls_key: the server presented TLS key sha256:${mitm.spkiSha256} but the enclave attests sha256:[0-9a-f]{64}`),
    );
    expect(mitm.seen()).toContain('GET /v1/verify/attestation?nonce=');
    expect(mitm.seen()).not.toContain('POST');
    expect(chatRequests()).toBe(before);
  });

  it('appearing after attestation is cut during the handshake: no request byte reaches it', async () => {
    mitm.setMode('pass');
    // The client's connections to the interceptor, as undici reports them made, kept until they close.
    const clientConnections = new Set<Socket>();
    const connected = (message: unknown) => {
      const { socket } = message as { socket: Socket };
      if (socket.remotePort !== Number(new URL(mitm.url).port)) return;
      clientConnections.add(socket);
      socket.once('close', () => clientConnections.delete(socket));
    };
    subscribe('undici:client:connected', connected);
    const attested = await createAttestedFetch({ baseURL: `${mitm.url}/v1`, allowNoTee: true });
    const client = new OpenAI({ baseURL: `${mitm.url}/v1`, apiKey: tlsOnly.key, maxRetries: 0, fetch: attested as unknown as typeof fetch });
    try {
      await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'warm up' }] });
      expect(attested.receipts.at(-1)?.ok).toBe(true);
      const seenBefore = mitm.seen().length;
      const before = chatRequests();
      expect(clientConnections.size).toBeGreaterThan(0);
      mitm.setMode('intercept');
      // Let the client see its kept-alive connection closed, so the next request opens a new one through the interceptor.
      await waitFor('the client seeing its connections cut', () => clientConnections.size === 0);
      const refused = (await refusalOf(client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: PROMPT }] })))!;
      expect(refused).toBeInstanceOf(OpenAI.APIConnectionError);
      // The connector refused the interceptor's key; re-attesting through it fails on exactly that key.
      expect(refused.cause?.code).toBe('ERR_VERIFY_ATTESTATION');
      expect(refused.cause?.message).toMatch(new RegExp(`attestation.tls_key: the server presented TLS key sha256:${mitm.spkiSha256} but the enclave attests`));
      // It re-attested over the new connection (GETs only) and refused; the POST and the prompt never went out.
      expect(mitm.seen().slice(seenBefore)).not.toContain('POST');
      expect(mitm.seen()).not.toContain(PROMPT);
      expect(chatRequests()).toBe(before);
    } finally {
      unsubscribe('undici:client:connected', connected);
      await attested.close();
    }
  });

  it('makes sigil verify --url refuse to send its prompt', async () => {
    mitm.setMode('intercept');
    const { verifyCommand } = await import('../../src/cli/verify.ts');
    let stdout = '';
    const io = { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: () => true }, stdin: process.stdin, env: {} };
    const before = chatRequests();
    const code = await verifyCommand(['-v', '--url', mitm.url, '--api-key', tlsOnly.key, '--allow-no-tee'], io as never);
    expect(code).toBe(1);
    expect(stdout).toMatch(/^FAIL attestation\.tls_key — the server presented TLS key sha256:[0-9a-f]{64} but the enclave attests/m);
    expect(stdout).toContain('FAIL live.request — not sent: the connection does not end in the attested enclave');
    expect(chatRequests()).toBe(before);
  });
});

describe('createAttestedFetch against hardware evidence (a test AMD chain)', () => {
  const measurement = randomBytes(48);
  let chain: AmdTestChain;
  let service: TeeSigil;
  beforeAll(async () => {
    chain = await createAmdTestChain('Milan');
    service = await startSnpSigil({ engineUrl: engine.baseUrl, chain, measurement, milan: true, model: 'm' });
  });
  afterAll(async () => service.close(0));
  /** Every value Sigil's evidence shows, pinned: the manifest it measured itself as, the report's fields and the machine. */
  const pinned = (): ReferenceValues => pinnedSnpReference(measurement, service.manifest);

  it('accepts the service when the measurement is one of the reference values, and verifies its receipts', async () => {
    const attested = await createAttestedFetch({ baseURL: service.url, roots: chain.roots, reference: pinned() });
    try {
      expect(attested.attestation.tee).toBe('sev-snp');
      expect(attested.attestation.verdict.outcome).toBe('verified');
      expect(attested.attestation.checks.filter((c) => checkMark(c) !== 'PASS')).toEqual([]);
      expect(attested.attestation.checks.map((c) => c.name)).toEqual(
        expect.arrayContaining(['attestation.tls_key', 'snp.report_signature', 'attestation.report_data', 'attestation.signed_nonce']),
      );
      // The hardware report is the start evidence; freshness is the nonce signed by the key it binds.
      expect(attested.attestation.checks.find((c) => c.name === 'attestation.report_data')?.detail).toContain(
        'the all-zero nonce (the start evidence, not fresh)',
      );
      const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: service.key, maxRetries: 0, fetch: attested as unknown as typeof fetch });
      await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
      expect(attested.receipts.at(-1)).toMatchObject({ ok: true, stream: false });
    } finally {
      await attested.close();
    }
  });

  it('refuses a genuine enclave without reference values, sending nothing, and names what was not pinned', async () => {
    const before = chatRequests();
    const refused = (await refusalOf(createAttestedFetch({ baseURL: service.url, roots: chain.roots }))) as Refusal & { code?: string };
    expect(refused?.code).toBe('ERR_VERIFY_ATTESTATION');
    expect(refused?.message).toContain('NOT VERIFIED: ');
    expect(refused?.message).toContain('reference.values: NOT PINNED: no reference values given');
    expect(chatRequests()).toBe(before);
  });

  it('accepts it with allowUnpinnedCode, and lists every unpinned value as waived', async () => {
    const attested = await createAttestedFetch({ baseURL: service.url, roots: chain.roots, allowUnpinnedCode: true });
    try {
      expect(attested.attestation.verdict.outcome).toBe('verified-with-waivers');
      expect(attested.attestation.verdict.waived.map((c) => c.name)).toEqual([
        'snp.smt',
        'snp.vmpl',
        'snp.reported_tcb',
        'snp.launch_tcb',
        'snp.firmware_version',
        'snp.guest_policy',
        'snp.platform_info',
        'snp.id_block',
        'snp.instance',
        'snp.mitigation_vector',
        'attestation.measurement',
        'reference.values',
        'reference.measurement',
        'reference.host_data',
        'attestation.manifest',
      ]);
      expect(attested.attestation.verdict.waived.every((c) => c.waived === 'allowUnpinnedCode: code nobody pinned is accepted')).toBe(true);
    } finally {
      await attested.close();
    }
  });

  it('refuses the service, sending nothing, when the measurement is not a reference value', async () => {
    const other = randomBytes(48).toString('hex');
    const before = chatRequests();
    const error = await createAttestedFetch({ baseURL: service.url, roots: chain.roots, reference: { snp: { measurement: [other] } } }).catch(
      (e: unknown) => e as Error,
    );
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(/^the service's attestation did not verify, so nothing was sent: .*measurement/);
    expect(chatRequests()).toBe(before);
  });
});

describe('a service restarted with new keys', () => {
  it('is re-attested: a body sealed to the old HPKE key is refused (422, nothing processed), the new key attested, the request sent once more', async () => {
    const first = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
    const port = Number(new URL(first.url).port);
    const attested = await createAttestedFetch({ baseURL: `${first.url}/v1`, allowNoTee: true });
    let second: TestSigil | undefined;
    try {
      const client = new OpenAI({ baseURL: `${first.url}/v1`, apiKey: first.key, maxRetries: 0, fetch: attested as unknown as typeof fetch });
      await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'before' }] });
      const before = attested.attestation;
      await first.close(0);
      // Same address, new process: new HPKE key, new signing key; the same API key file contents are not kept, so use the new key.
      second = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }], config: { listen: { host: '127.0.0.1', port } } });
      const again = new OpenAI({ baseURL: `${first.url}/v1`, apiKey: second.key, maxRetries: 0, fetch: attested as unknown as typeof fetch });
      const completion = await again.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'after' }] });
      expect(completion.object).toBe('chat.completion');
      // A new process signs with a new key: the client now trusts the JWKS the new enclave binds.
      expect(attested.attestation.jwks).not.toEqual(before.jwks);
      expect(Buffer.from(attested.attestation.hpkeKeyConfig!).equals(Buffer.from(before.hpkeKeyConfig!))).toBe(false);
      expect(attested.receipts.at(-1)).toMatchObject({ ok: true });
      const lines = (await requestLines(second, 0, 4)).filter((l) => l.route === '/v1/chat/completions');
      expect(lines.map((l) => l.status)).toEqual([422, 200]);
    } finally {
      await attested.close();
      await second?.close(0);
    }
  });
});

describe('the attested client never returns an unauthenticated answer (the official openai client behind a forging proxy)', () => {
  let balancer: ForgingProxy;
  let plain: TestSigil;
  let plainProxy: ForgingProxy;
  beforeAll(async () => {
    // A load balancer ending TLS in front of the service with encrypted bodies; a proxy in front of a plain development service.
    balancer = await startForgingProxy(sigil.url, { tls: true });
    plain = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }], config: { ehbp: { enabled: false } } });
    plainProxy = await startForgingProxy(plain.url);
  });
  afterAll(async () => {
    await balancer.close();
    await plainProxy.close();
    await plain.close(0);
  });

  const forgeChat = (proxy: ForgingProxy, status: number, contentType: string, body: string) => {
    proxy.forge = (method, path) =>
      method === 'POST' && path === '/v1/chat/completions' ? { status, headers: { 'content-type': contentType }, body } : undefined;
  };

  it('refuses a 203 JSON completion the balancer wrote to a sealed request: not sealed, so not returned', async () => {
    const attested = await createAttestedFetch({ baseURL: `${balancer.url}/v1`, allowNoTee: true, ca: balancer.certificate });
    try {
      forgeChat(balancer, 203, 'application/json', FORGED_COMPLETION);
      const client = new OpenAI({ baseURL: `${balancer.url}/v1`, apiKey: sigil.key, maxRetries: 0, fetch: attested as unknown as typeof fetch });
      const refused = await refusalOf(client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: PROMPT }] }));
      expect(refused).toBeInstanceOf(OpenAI.APIConnectionError);
      expect(refused?.cause?.code).toBe('ERR_VERIFY_UNSEALED_RESPONSE');
      expect(refused?.cause?.message).toBe(
        'the answer to a sealed request (HTTP 203) is not sealed to our request: it may not come from the enclave, so it is not returned',
      );
      expect(balancer.forged).toBe(1);
    } finally {
      balancer.forge = () => undefined;
      await attested.close();
    }
  });

  it('refuses a forged 203 event stream to a sealed request', async () => {
    const attested = await createAttestedFetch({ baseURL: `${balancer.url}/v1`, allowNoTee: true, ca: balancer.certificate });
    try {
      forgeChat(balancer, 203, 'text/event-stream', FORGED_STREAM);
      const client = new OpenAI({ baseURL: `${balancer.url}/v1`, apiKey: sigil.key, maxRetries: 0, fetch: attested as unknown as typeof fetch });
      const refused = await refusalOf(
        (async () => {
          const stream = await client.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: PROMPT }] });
          for await (const chunk of stream) void chunk;
        })(),
      );
      expect(refused).toBeInstanceOf(OpenAI.APIConnectionError);
      expect(refused?.cause?.code).toBe('ERR_VERIFY_UNSEALED_RESPONSE');
    } finally {
      balancer.forge = () => undefined;
      await attested.close();
    }
  });

  it("answers the model list through the balancer from the attested policy, never the forgery; one over TLS ending in the enclave is the service's", async () => {
    const behind = await createAttestedFetch({ baseURL: `${balancer.url}/v1`, allowNoTee: true, ca: balancer.certificate });
    const direct = await createAttestedFetch({ baseURL: `${sigilUrl()}/v1`, allowNoTee: true });
    try {
      const models = { object: 'list', data: [{ id: 'forged-model', object: 'model', created: 1, owned_by: 'x' }] };
      balancer.forge = (method, path) =>
        method === 'GET' && path === '/v1/models' ? { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify(models) } : undefined;
      const before = balancer.forged;
      const attested = await behind(`${balancer.url}/v1/models`, { headers: { authorization: `Bearer ${sigil.key}` } });
      const provider = (behind.attestation.policy as { models: Array<{ provider: string }> }).models[0]!.provider;
      expect(await attested.json()).toEqual({ object: 'list', data: [{ id: 'm', object: 'model', created: 0, owned_by: provider }] });
      expect(attested.headers.get(SOURCE_HEADER)).toBe(
        'the attested policy: only the model ids and providers it binds (names, prices and context windows are not bound, so not given)',
      );
      expect(attested.headers.get(UNVERIFIED_HEADER)).toBeNull();
      expect(balancer.forged).toBe(before);
      const pinned = await direct(`${sigilUrl()}/v1/models`, { headers: { authorization: `Bearer ${sigil.key}` } });
      expect(pinned.status).toBe(200);
      expect(pinned.headers.get(UNVERIFIED_HEADER)).toBeNull();
      expect(pinned.headers.get(SOURCE_HEADER)).toBeNull();
    } finally {
      balancer.forge = () => undefined;
      await behind.close();
      await direct.close();
    }
  });

  it('refuses a 203 completion without a receipt from a development service: every 2xx answer to a receipt request needs one', async () => {
    const attested = await createAttestedFetch({ baseURL: `${plainProxy.url}/v1`, allowNoTee: true });
    try {
      forgeChat(plainProxy, 203, 'application/json', FORGED_COMPLETION);
      const client = new OpenAI({ baseURL: `${plainProxy.url}/v1`, apiKey: plain.key, maxRetries: 0, fetch: attested as unknown as typeof fetch });
      const refused = await refusalOf(client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }));
      expect(refused).toBeInstanceOf(OpenAI.APIConnectionError);
      expect(refused?.cause?.code).toBe('ERR_VERIFY_RECEIPT');
      expect(refused?.cause?.message).toBe("the response's receipt did not verify: the response carries no receipt header");
    } finally {
      plainProxy.forge = () => undefined;
      await attested.close();
    }
  });

  it('refuses plain http:// to a service with encrypted bodies unless the development option is set: the API key would cross in the clear', async () => {
    const first = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }] });
    try {
      const refused = (await refusalOf(createAttestedFetch({ baseURL: `${first.url}/v1` }))) as Refusal & {
        code?: string;
        checks?: Array<{ name: string; ok: boolean; detail: string }>;
      };
      expect(refused?.code).toBe('ERR_VERIFY_ATTESTATION');
      const tlsKey = refused?.checks?.find((c) => c.name === 'attestation.tls_key');
      expect(tlsKey).toEqual({
        name: 'attestation.tls_key',
        ok: false,
        detail: `the service was reached over plain HTTP (${new URL(first.url).origin}): anyone on the path can read and change the traffic, and no TLS key can be compared with the attested one`,
      });
    } finally {
      await first.close(0);
    }
  });
});
