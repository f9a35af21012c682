import { createHash } from 'node:crypto';
import canonicalizeModule from 'canonicalize';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

const canonicalize = canonicalizeModule as unknown as (v: unknown) => string;

let engine: TestEngine;
let sigil: TestSigil;
/** How far the receipt store's clock is ahead of the real one, moved by the retention test. */
let clockAheadMs = 0;

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m', 'engine-name'] });
  sigil = await startTestSigil({
    upstreams: { main: { url: engine.baseUrl, region: 'eu-west' } },
    models: [{ id: 'm' }, { id: 'n', upstream_model: 'engine-name' }],
    config: { receipts: { retention_s: 1 } },
    start: { now: () => Date.now() + clockAheadMs },
  });
});

afterAll(async () => {
  await sigil.close();
  await engine.close();
});

const getJson = async (path: string) => {
  const res = await fetch(`${sigil.url}${path}`);
  return { status: res.status, body: await res.json() };
};

describe('GET /v1/verify/policy', () => {
  it('lists the models with hashes and upstreams, the attestation provider, logging and retention', async () => {
    const { status, body } = await getJson('/v1/verify/policy');
    expect(status).toBe(200);
    expect(body).toEqual({
      schema_version: '1.1.0',
      models: [
        {
          id: 'm',
          provider: 'test-provider',
          model_hash: 'sha256:' + '01'.repeat(32),
          upstream_model: 'm',
          upstreams: [{ name: 'main', url: engine.baseUrl, region: 'eu-west' }],
        },
        {
          id: 'n',
          provider: 'test-provider',
          model_hash: 'sha256:' + '02'.repeat(32),
          upstream_model: 'engine-name',
          upstreams: [{ name: 'main', url: engine.baseUrl, region: 'eu-west' }],
        },
      ],
      upstreams: [
        {
          name: 'main',
          url: engine.baseUrl,
          region: 'eu-west',
          place: 'inside_vm',
          transport: 'loopback',
          tls_pin_sha256: null,
          allow_outside_vm: false,
          forward_headers: [],
          cache_salt: false,
        },
      ],
      attestation: { provider: 'none' },
      logging: {
        level: 'info',
        prompt_content: 'never',
        completion_content: 'never',
        api_keys: 'never',
        request_fields: [
          'request_id',
          'method',
          'route',
          'path',
          'status',
          'latency_ms',
          'model',
          'key_id',
          'upstream',
          'stream',
          'receipt',
          'usage_tokens',
          'error_code',
        ],
      },
      receipts: { alg: 'ES256', retention_s: 1 },
    });
  });

  it('is the document whose JCS SHA-256 every receipt carries as policy_hash', async () => {
    const res = await fetch(`${sigil.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-service-receipt': 'true' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }] }),
    });
    await res.arrayBuffer();
    const claims = JSON.parse(Buffer.from(res.headers.get('x-service-receipt')!.split('.')[1]!, 'base64url').toString());
    const policy = (await getJson('/v1/verify/policy')).body;
    expect(claims.policy_hash).toBe('sha256:' + createHash('sha256').update(canonicalize(policy)).digest('hex'));
  });
});

describe('GET /v1/verify/attestation', () => {
  // SPEC 5, computed here independently of the server's code.
  const reportDataOf = (nonceHex: string, binding: unknown) =>
    createHash('sha512')
      .update('sigil-attestation-v2')
      .update(Buffer.of(0))
      .update(Buffer.from(nonceHex, 'hex'))
      .update(createHash('sha256').update(canonicalize(binding)).digest())
      .digest('hex');

  it('without a nonce: the start-up evidence, version 2, binding the JWKS and the policy, tee none', async () => {
    const jwks = (await getJson('/v1/verify/jwks.json')).body;
    const policy = (await getJson('/v1/verify/policy')).body;
    const { body } = await getJson('/v1/verify/attestation');
    // EHBP is on by default: the binding carries the exact key config bytes served (SPEC 9).
    const keyConfig = Buffer.from(await (await fetch(`${sigil.url}/.well-known/hpke-keys`)).arrayBuffer()).toString('base64');
    const binding = {
      jwks,
      policy_hash: 'sha256:' + createHash('sha256').update(canonicalize(policy)).digest('hex'),
      tls_spki_sha256: null,
      hpke_key_config: keyConfig,
      gpu_evidence_sha256: [],
      // Without hardware the manifest and its start event are reported as the process computed them, vouched for by nothing.
      manifest_sha384: body.binding.manifest_sha384,
      key_origin: { receipt: { origin: 'generated' }, tls: null, hpke: { origin: 'generated' } },
      runtime_events_sha384: [body.event_log.runtime_events[0].digest],
    };
    expect(body.binding.manifest_sha384).toMatch(/^[0-9a-f]{96}$/);
    const [event] = body.event_log.runtime_events;
    expect(createHash('sha384').update(event.payload).digest('hex')).toBe(event.digest);
    expect(JSON.parse(event.payload)).toMatchObject({
      reason: 'start',
      seq: 0,
      manifest_sha384: body.binding.manifest_sha384,
      policy_hash: binding.policy_hash,
    });
    expect(body).toEqual({
      version: 2,
      tee: 'none',
      measurement: '0'.repeat(96),
      nonce: '00'.repeat(32),
      binding,
      report_data: reportDataOf('00'.repeat(32), binding),
      evidence: null,
      event_log: {
        ccel_table: null,
        ccel_data: null,
        runtime_events: [event],
        self_measurement: { extended: false, reason: 'no hardware: the events are listed, not measured' },
      },
      gpu_evidence: [],
    });
  });

  it('with a nonce: report_data = SHA-512("sigil-attestation-v2" || 0x00 || nonce || SHA-256(JCS(binding)))', async () => {
    const nonce = 'ab'.repeat(32);
    const jwks = (await getJson('/v1/verify/jwks.json')).body;
    const { body } = await getJson(`/v1/verify/attestation?nonce=${nonce}`);
    expect(body.binding.jwks).toEqual(jwks);
    expect(body).toMatchObject({ version: 2, tee: 'none', nonce, report_data: reportDataOf(nonce, body.binding), evidence: null });
    expect(reportDataOf(nonce, { ...body.binding, policy_hash: 'sha256:' + '0'.repeat(64) })).not.toBe(body.report_data);
  });

  it.each(['abc', 'zz'.repeat(32), 'ab'.repeat(33)])('refuses the nonce %s', async (nonce) => {
    expect(await getJson(`/v1/verify/attestation?nonce=${nonce}`)).toEqual({
      status: 400,
      body: { error: { message: "'nonce' must be 32 bytes as 64 hex digits.", type: 'invalid_request_error', param: 'nonce', code: 'invalid_value' } },
    });
  });
});

describe('receipt retention', () => {
  it('forgets a receipt after retention_s', async () => {
    const res = await fetch(`${sigil.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sigil.key}`, 'content-type': 'application/json', 'x-service-receipt': 'true' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true }),
    });
    await res.text();
    const path = `${sigil.url}/v1/receipts/${res.headers.get('x-service-receipt-id')}`;
    const auth = { headers: { authorization: `Bearer ${sigil.key}` } };
    expect((await fetch(path, auth)).status).toBe(200);
    clockAheadMs += 1001;
    expect((await fetch(path, auth)).status).toBe(404);
  });
});
