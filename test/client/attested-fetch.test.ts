import { randomBytes } from 'node:crypto';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttestedFetch, type AttestedFetch } from '../../src/client/index.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { requestLines, startTestSigil, type TestSigil } from '../support/sigil.ts';
import { startTlsMitm, type TlsMitm } from '../support/tls-mitm.ts';
import { amdCertTable, buildSnpReport, createAmdTestChain, type AmdTestChain } from '../support/evidence-fixtures.ts';
import { startFakeService, TEST_API_KEY, type FakeService } from '../verify/cli-server.ts';
import { makeSigner } from '../verify/receipt-fixtures.ts';

const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');

/** SPEC 8 / issue 12: the attested client, with the official openai package, and a man in the middle it refuses. */
let engine: TestEngine;
/** TLS in the enclave and encrypted bodies (the defaults with TLS on); and TLS alone. */
let sigil: TestSigil;
let tlsOnly: TestSigil;
let mitm: TlsMitm;
let ehbpMitm: TlsMitm;
const PROMPT = 'the secret prompt 7f3a9c';

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

  it('attests before the first request: the TLS key, the binding, the policy, all named', () => {
    const names = attested.attestation.checks.map((c) => `${c.ok ? 'PASS' : 'FAIL'} ${c.name}`);
    expect(names).toEqual(['PASS attestation.tls_key', 'PASS attestation.hpke_key', 'PASS binding.nonce', 'PASS binding.jwks', 'PASS binding.report_data', 'PASS attestation.tee', 'PASS gpu.evidence', 'PASS attestation.policy']);
    expect(attested.attestation.tlsSpkiSha256).toMatch(/^[0-9a-f]{64}$/);
    expect(attested.attestation.checks[0]!.detail).toContain(`sha256:${attested.attestation.tlsSpkiSha256}, the key the enclave attests`);
  });

  it('verifies the receipt of a JSON completion over the exact bytes', async () => {
    const completion = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hello there' }] });
    expect(completion.object).toBe('chat.completion');
    const last = attested.receipts.at(-1)!;
    expect(last).toMatchObject({ path: '/v1/chat/completions', stream: false, ok: true });
    expect(last.checks.filter((c) => !c.ok)).toEqual([]);
    expect(last.checks.map((c) => c.name)).toEqual(expect.arrayContaining(['receipt.signature', 'receipt.nonce', 'receipt.request_hash', 'receipt.response_hash', 'receipt.measurement', 'receipt.policy_hash']));
    expect(last.claims?.receipt_type).toBe('message');
  });

  it('passes a stream through chunk by chunk and verifies its receipt at the end', async () => {
    const stream = await client.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'one two three four' }] });
    const deltas: string[] = [];
    for await (const chunk of stream) deltas.push(chunk.choices[0]?.delta?.content ?? '');
    expect(deltas.join('').length).toBeGreaterThan(0);
    const last = attested.receipts.at(-1)!;
    expect(last).toMatchObject({ path: '/v1/chat/completions', stream: true, ok: true });
    expect(last.checks.find((c) => c.name === 'receipt.response_hash')?.ok).toBe(true);
  });

  it('fails a request whose receipt does not verify, and reports it', async () => {
    const reporting = await createAttestedFetch({ baseURL: `${sigilUrl()}/v1`, allowNoTee: true, brand: 'Other' });
    try {
      const strict = new OpenAI({ baseURL: `${sigilUrl()}/v1`, apiKey: sigil.key, maxRetries: 0, fetch: reporting as unknown as typeof fetch });
      // Sigil's brand is Service: a client expecting X-Other-Receipt finds no receipt on the response.
      const error = await strict.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e as Error & { cause?: Error });
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
      expect(tlsKey.ok).toBe(true);
      expect(tlsKey.detail).toMatch(/^not needed: the server presented TLS key sha256:[0-9a-f]{64} but the enclave attests .*; every body is sealed to the attested HPKE key instead$/);
      const client = new OpenAI({ baseURL: `${ehbpMitm.url}/v1`, apiKey: sigil.key, maxRetries: 0, fetch: attested as unknown as typeof fetch });
      const completion = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: PROMPT }] });
      expect(attested.receipts.at(-1)).toMatchObject({ ok: true, stream: false });
      const stream = await client.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: PROMPT }] });
      let streamed = '';
      for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? '';
      expect(attested.receipts.at(-1)).toMatchObject({ ok: true, stream: true });
      expect(mitm.seen().length + ehbpMitm.seen().length).toBeGreaterThan(0);
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
    expect((error as Error).message).toMatch(new RegExp(`attestation.tls_key: the server presented TLS key sha256:${mitm.spkiSha256} but the enclave attests sha256:[0-9a-f]{64}`));
    expect(mitm.seen()).toContain('GET /v1/verify/attestation?nonce=');
    expect(mitm.seen()).not.toContain('POST');
    expect(chatRequests()).toBe(before);
  });

  it('appearing after attestation is cut during the handshake: no request byte reaches it', async () => {
    mitm.setMode('pass');
    const attested = await createAttestedFetch({ baseURL: `${mitm.url}/v1`, allowNoTee: true });
    const client = new OpenAI({ baseURL: `${mitm.url}/v1`, apiKey: tlsOnly.key, maxRetries: 0, fetch: attested as unknown as typeof fetch });
    try {
      await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'warm up' }] });
      expect(attested.receipts.at(-1)?.ok).toBe(true);
      const seenBefore = mitm.seen().length;
      const before = chatRequests();
      mitm.setMode('intercept');
      await expect(client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: PROMPT }] })).rejects.toThrow();
      // It re-attested over the new connection (GETs only) and refused; the POST and the prompt never went out.
      expect(mitm.seen().slice(seenBefore)).not.toContain('POST');
      expect(mitm.seen()).not.toContain(PROMPT);
      expect(chatRequests()).toBe(before);
    } finally {
      await attested.close();
    }
  });

  it('makes sigil verify --url refuse to send its prompt', async () => {
    mitm.setMode('intercept');
    const { verifyCommand } = await import('../../src/cli/verify.ts');
    let stdout = '';
    const io = { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: () => true }, stdin: process.stdin, env: {} };
    const before = chatRequests();
    const code = await verifyCommand(['--url', mitm.url, '--api-key', tlsOnly.key, '--allow-no-tee'], io as never);
    expect(code).toBe(1);
    expect(stdout).toMatch(/^FAIL attestation\.tls_key — the server presented TLS key sha256:[0-9a-f]{64} but the enclave attests/m);
    expect(stdout).toContain('FAIL live.request — not sent: the connection does not end in the attested enclave');
    expect(chatRequests()).toBe(before);
  });
});

describe('createAttestedFetch against hardware evidence (a test AMD chain)', () => {
  const measurement = randomBytes(48);
  let chain: AmdTestChain;
  let service: FakeService;
  beforeAll(async () => {
    chain = await createAmdTestChain();
    service = await startFakeService(await makeSigner(), {
      tee: 'sev-snp',
      measurement: measurement.toString('hex'),
      evidence: (reportData) => ({ report: b64(buildSnpReport({ reportData, measurement }, chain.vcekKey)), certificates: b64(amdCertTable(chain)) }),
    });
  });
  afterAll(async () => service.close());

  it('accepts the service when the measurement is one of the reference values, and verifies its receipts', async () => {
    const attested = await createAttestedFetch({ baseURL: service.url, roots: chain.roots, reference: { snp: { measurement: [measurement.toString('hex')] } } });
    try {
      expect(attested.attestation.tee).toBe('sev-snp');
      expect(attested.attestation.checks.filter((c) => !c.ok)).toEqual([]);
      expect(attested.attestation.checks.map((c) => c.name)).toEqual(expect.arrayContaining(['attestation.tls_key', 'snp.report_signature', 'attestation.report_data']));
      const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: TEST_API_KEY, maxRetries: 0, fetch: attested as unknown as typeof fetch });
      await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] });
      expect(attested.receipts.at(-1)).toMatchObject({ ok: true, stream: false });
    } finally {
      await attested.close();
    }
  });

  it('refuses the service, sending nothing, when the measurement is not a reference value', async () => {
    const other = randomBytes(48).toString('hex');
    const lastExchange = service.last;
    const error = await createAttestedFetch({ baseURL: service.url, roots: chain.roots, reference: { snp: { measurement: [other] } } }).catch((e: unknown) => e as Error);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(/^the service's attestation did not verify, so nothing was sent: .*measurement/);
    expect(service.last).toBe(lastExchange);
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
      expect(attested.attestation).not.toBe(before);
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
