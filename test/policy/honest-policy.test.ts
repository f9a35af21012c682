import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AttestationProvider } from '../../src/attestation/provider.ts';
import { makeSelfSignedCredentials } from '../../src/tls/self-signed.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** docs/attestation.md, "The policy document": it says what the running configuration does, nothing more. */
const tdx: AttestationProvider = {
  tee: 'tdx',
  collect: async (reportData) => ({ tee: 'tdx', measurement: 'ab'.repeat(48), outblob: new Uint8Array(64), auxblob: new Uint8Array(), reportData }),
};

let engine: TestEngine;
const started: TestSigil[] = [];

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
});

afterAll(async () => {
  await Promise.all(started.map((s) => s.close(0)));
  await engine.close();
});

async function sigilWith(upstreams: Record<string, Record<string, unknown>>, config: Record<string, unknown> = {}, provider?: AttestationProvider) {
  const sigil = await startTestSigil({
    upstreams,
    models: [{ id: 'm', upstream: Object.keys(upstreams) }],
    config: { ...config, ...(provider ? { tls: { mode: 'self-signed', hostnames: ['localhost'] } } : {}) },
    ...(provider ? { start: { attestationProvider: provider } } : {}),
  });
  started.push(sigil);
  return sigil;
}

const policyOf = async (s: TestSigil) =>
  (await (await fetch(`${s.url}/v1/verify/policy`, s.url.startsWith('https') ? ({ dispatcher: undefined } as RequestInit) : {})).json()) as Record<
    string,
    unknown
  >;

describe('the policy document', () => {
  it('states the log level and what its lines hold, each engine with where it runs, how bytes reach it and the client headers it gets', async () => {
    const sigil = await sigilWith(
      { local: { url: engine.baseUrl }, remote: { url: 'http://10.20.30.40:8000/v1', forward_headers: ['Authorization', 'x-tenant'] } },
      { log: { level: 'warn' } },
    );
    const policy = await policyOf(sigil);
    expect(policy.logging).toEqual({ level: 'warn', prompt_content: 'never', completion_content: 'never', api_keys: 'never', request_fields: [] });
    expect(policy.upstreams).toEqual([
      {
        name: 'local',
        url: engine.baseUrl,
        region: null,
        place: 'inside_vm',
        transport: 'loopback',
        tls_pin_sha256: null,
        allow_outside_vm: false,
        forward_headers: [],
        cache_salt: false,
      },
      {
        name: 'remote',
        url: 'http://10.20.30.40:8000/v1',
        region: null,
        place: 'outside_vm',
        transport: 'plaintext',
        tls_pin_sha256: null,
        allow_outside_vm: false,
        forward_headers: ['authorization', 'x-tenant'],
        cache_salt: false,
      },
    ]);
    const debug = await policyOf(await sigilWith({ local: { url: engine.baseUrl } }, { log: { level: 'debug' } }));
    expect((debug.logging as { level: string; request_fields: string[] }).level).toBe('debug');
    expect((debug.logging as { request_fields: string[] }).request_fields).toContain('request_id');
  });

  it('on a hardware TEE, refuses an engine outside the VM unless its TLS key is pinned or allow_outside_vm says so, which the policy shows', async () => {
    await expect(sigilWith({ remote: { url: 'https://engine.example:8443/v1' } }, {}, tdx)).rejects.toThrow(
      "upstreams.remote: https://engine.example:8443/v1 is outside this confidential VM, so prompts would leave it over TLS no attested key vouches for. Pin the engine's TLS key (tls_pin_sha256: the SHA-256 of its SPKI, with an https URL), or set allow_outside_vm: true, which the policy shows.",
    );
    await expect(sigilWith({ remote: { url: 'http://10.1.2.3/v1' } }, {}, tdx)).rejects.toThrow(
      /is outside this confidential VM, so prompts would leave it in plaintext/,
    );
    await expect(sigilWith({ remote: { url: 'http://10.1.2.3/v1', tls_pin_sha256: 'ab'.repeat(32) } }, {}, tdx)).rejects.toThrow(
      /a pinned TLS key needs an https URL/,
    );
    const allowed = await sigilWith({ remote: { url: 'http://10.1.2.3/v1', allow_outside_vm: true } }, {}, tdx);
    expect(allowed.url).toMatch(/^https:/);
  });
});

describe('an engine pinned by tls_pin_sha256', () => {
  let server: ReturnType<typeof createHttpsServer>;
  let url: string;
  let spki: string;
  beforeAll(async () => {
    const credentials = await makeSelfSignedCredentials(['localhost']);
    spki = credentials.spkiSha256;
    // A TLS front for the test engine: the engine's answers, behind a key the config can pin.
    server = createHttpsServer({ key: credentials.key, cert: credentials.cert }, async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const upstream = await fetch(`${engine.baseUrl.replace(/\/v1$/, '')}${req.url}`, {
        method: req.method,
        headers: { 'content-type': 'application/json' },
        ...(req.method === 'POST' ? { body: Buffer.concat(chunks) } : {}),
      });
      res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' });
      res.end(Buffer.from(await upstream.arrayBuffer()));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  });
  afterAll(async () => new Promise<void>((r) => server.close(() => r())));

  const chat = (s: TestSigil) =>
    fetch(`${s.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    });

  it('is reached when it presents that key, and refused (502, nothing sent) when it presents another', async () => {
    const good = await sigilWith({ e: { url, tls_pin_sha256: spki } });
    const ok = await chat(good);
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { object: string }).object).toBe('chat.completion');
    expect(((await policyOf(good)).upstreams as Array<{ transport: string }>)[0]!.transport).toBe('loopback');
    const bad = await sigilWith({ e: { url, tls_pin_sha256: '00'.repeat(32) } });
    const before = engine.requests.filter((r) => r.method === 'POST').length;
    const refused = await chat(bad);
    expect(refused.status).toBe(502);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('upstream_bad_response');
    expect(engine.requests.filter((r) => r.method === 'POST').length).toBe(before);
  });
});
