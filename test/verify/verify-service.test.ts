import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { reportDataV2, type AttestationBinding } from '../../src/protocol/attestation.ts';
import { checkMark, type Check } from '../../src/verify/check.ts';
import { CHECKS, describeCheck } from '../../src/verify/check-registry.ts';
import { canonicalPolicyHash, sha256Tagged } from '../../src/verify/digest.ts';
import { makeSigner, messageClaims } from './receipt-fixtures.ts';
import type { ReferenceValues } from '../../src/verify/reference/reference-values.ts';
import { verifyService, type ServiceEvidence } from '../../src/verify/verify-service.ts';
import {
  amdCertTable,
  buildSnpReport,
  createAmdTestChain,
  pinnedSnpReference,
  snpDocument,
  testBinding,
  testJwks,
  type AmdTestChain,
} from '../support/evidence-fixtures.ts';

/** The one core, without any I/O: a document made with a test AMD chain, and what a caller fetched with it. */
const jwks = testJwks();
const nonce = new Uint8Array(32).fill(0x5a);
const measurement = Buffer.alloc(48, 0x42);
const policy = { version: 1, models: [] };
const SPKI = 'ab'.repeat(32);
const MANIFEST = '4d'.repeat(48);
/** Sigil's start event naming this binding's manifest and policy (the shared fixture's names another policy). */
const startEvent = (() => {
  const payload = JSON.stringify({
    at: '2026-01-01T00:00:00.000Z',
    kind: 'sigil-event/2',
    manifest_sha384: MANIFEST,
    policy_hash: canonicalPolicyHash(policy),
    reason: 'start',
    seq: 0,
  });
  return { imr: 3, event: 'sigil', digest: createHash('sha384').update(payload).digest('hex'), payload };
})();
const binding: AttestationBinding = {
  ...testBinding(jwks),
  policy_hash: canonicalPolicyHash(policy),
  tls_spki_sha256: SPKI,
  manifest_sha384: MANIFEST,
  runtime_events_sha384: [startEvent.digest],
};
const PINNED: ReferenceValues = pinnedSnpReference(measurement, MANIFEST);
let chain: AmdTestChain;
let document: Record<string, unknown>;

beforeAll(async () => {
  chain = await createAmdTestChain('Milan');
  const reportData = reportDataV2(nonce, binding);
  const report = buildSnpReport({ reportData, measurement, cpuid: { family: 0x19, model: 0x01 } }, chain.vcekKey);
  const doc = snpDocument(report, amdCertTable(chain), nonce, jwks, measurement.toString('hex'), reportData);
  document = { ...doc, binding, event_log: { ...(doc.event_log as object), runtime_events: [startEvent] } };
});

const fetched = (over: Partial<ServiceEvidence> = {}): ServiceEvidence => ({
  attestation: document,
  jwks,
  policy,
  startAttestation: document,
  connection: { url: new URL('https://inference.example'), presentedTlsKeys: [SPKI] },
  ...over,
});
const marks = (checks: Check[]) => checks.map((c) => `${checkMark(c)} ${c.name}`);

describe('verifyService', () => {
  it('verifies a genuine enclave whose every measured value is pinned, over TLS ending in it', async () => {
    const result = await verifyService(fetched(), { nonce, reference: PINNED, roots: chain.roots });
    expect(result.checks.filter((c) => checkMark(c) !== 'PASS')).toEqual([]);
    expect(result.verdict.outcome).toBe('verified');
    expect(result.verdict.summary).toBe(`verified: all ${result.checks.length} checks passed`);
    expect(result.facts).toMatchObject({
      tee: 'sev-snp',
      measurement: measurement.toString('hex'),
      tlsSpkiSha256: SPKI,
      hpkeKeyConfig: null,
      policyHash: binding.policy_hash,
    });
    expect(result.facts.attestationHash).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it('declares every check it reports in the registry, with a title, plain words and a docs/ link', async () => {
    const runs = await Promise.all([
      verifyService(fetched(), { nonce, reference: PINNED, roots: chain.roots }),
      verifyService(fetched(), { nonce, roots: chain.roots }),
      verifyService(fetched({ attestation: { ...document, tee: 'none' } }), { nonce }),
    ]);
    const undeclared = runs.flatMap((r) => r.checks.map((c) => c.name)).filter((name) => describeCheck(name) === undefined);
    expect(undeclared).toEqual([]);
    expect(describeCheck('gpu[0].nonce')?.name).toBe('gpu.*');
    expect(describeCheck('nothing.declared')).toBeUndefined();
    for (const c of CHECKS) expect([c.title.length > 0, c.explains.endsWith('.'), /^docs\/[a-z-]+\.md#[a-z0-9-]+$/.test(c.doc)]).toEqual([true, true, true]);
  });

  it('does not verify a genuine enclave running code nobody pinned, and lists every unpinned value', async () => {
    const result = await verifyService(fetched(), { nonce, roots: chain.roots });
    expect(result.verdict.outcome).toBe('not-verified');
    expect(result.verdict.failed).toEqual([]);
    expect(result.verdict.notPinned.map((c) => c.name)).toEqual([
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
    expect(result.verdict.summary).toMatch(/^NOT VERIFIED: \d+ checks passed; 15 not pinned, so compared with nothing \(snp\.smt, /);
  });

  it('verifies it with waivers when the caller waives unpinned code, and prints each as WAIVED with the reason', async () => {
    const result = await verifyService(fetched(), { nonce, roots: chain.roots, waive: { unpinnedCode: 'a test of the waiver' } });
    expect(result.verdict.outcome).toBe('verified-with-waivers');
    expect(result.verdict.waived.map((c) => [checkMark(c), c.waived])).toEqual(Array(15).fill(['WAIVED', 'a test of the waiver']));
    expect(result.verdict.summary).toMatch(/^verified with waivers: \d+ checks passed; 15 waived \(snp\.smt, /);
  });

  it('fails the evidence for another nonce than ours', async () => {
    const result = await verifyService(fetched(), { nonce: new Uint8Array(32).fill(1), reference: PINNED, roots: chain.roots });
    expect(result.verdict.failed.map((c) => c.name)).toEqual(['attestation.report_data']);
    expect(result.verdict.outcome).toBe('not-verified');
  });

  it('fails plain HTTP and a TLS key other than the attested one; no waiver turns them into passes', async () => {
    const http = await verifyService(fetched({ connection: { url: new URL('http://inference.example'), presentedTlsKeys: [] } }), {
      nonce,
      reference: PINNED,
      roots: chain.roots,
      waive: { noHardwareEnclave: 'dev' },
    });
    expect(marks(http.checks.filter((c) => c.name === 'attestation.tls_key'))).toEqual(['FAIL attestation.tls_key']);
    const other = await verifyService(fetched({ connection: { url: new URL('https://inference.example'), presentedTlsKeys: ['cd'.repeat(32)] } }), {
      nonce,
      reference: PINNED,
      roots: chain.roots,
    });
    expect(other.verdict.failed.map((c) => c.name)).toEqual(['attestation.tls_key']);
    expect(other.facts.tlsSpkiSha256).toBeNull();
  });

  it('says a browser cannot see the TLS key: not checked, never passed; waived only when bodies are sealed to the attested HPKE key', async () => {
    const browser = { url: new URL('https://inference.example'), presentedTlsKeys: 'not visible' as const };
    const unseen = await verifyService(fetched({ connection: browser }), { nonce, reference: PINNED, roots: chain.roots });
    expect(unseen.verdict.failed.map((c) => c.name)).toEqual(['attestation.tls_key']);
    expect(unseen.checks[0]!.detail).toBe(
      `not checked: this client cannot see which TLS key its connection used (a browser does not show it to a page), so nothing ties the connection to the attested key sha256:${SPKI}`,
    );
    expect(unseen.facts.tlsSpkiSha256).toBeNull();
  });

  it('checks the receipts of the exchanges it is given against the verified service: the core, not each caller', async () => {
    const signer = await makeSigner();
    const signed = { ...binding, jwks: { keys: [signer.publicJwk] } as AttestationBinding['jwks'] };
    const reportData = reportDataV2(nonce, signed);
    const report = buildSnpReport({ reportData, measurement, cpuid: { family: 0x19, model: 0x01 } }, chain.vcekKey);
    const doc = {
      ...snpDocument(report, amdCertTable(chain), nonce, signed.jwks as never, measurement.toString('hex'), reportData),
      binding: signed,
      event_log: document.event_log,
    };
    const request = new TextEncoder().encode('{"model":"m1"}');
    const response = new TextEncoder().encode('{"id":"chatcmpl-1"}');
    const startHash = sha256Tagged(Buffer.from(String((doc as Record<string, unknown>).evidence), 'base64'));
    const claims = messageClaims({
      enclave_measurement: measurement.toString('hex'),
      policy_hash: canonicalPolicyHash(policy),
      nonce: 'n-1',
      attestation_hash: startHash,
      request_hash: sha256Tagged(request),
      response_hash: sha256Tagged(response),
    });
    const exchange = { path: '/v1/chat/completions', stream: false, nonce: 'n-1', request, response, receiptHeader: signer.sign(claims) };
    const result = await verifyService(fetched({ attestation: doc, jwks: { keys: [signer.publicJwk] }, startAttestation: doc, exchanges: [exchange] }), {
      nonce,
      reference: PINNED,
      roots: chain.roots,
    });
    // The first receipt is also placed among the runtime events (receipt.event, from the evidence checks).
    expect(result.checks.map((c) => c.name)).toContain('receipt.event');
    const receipt = result.checks.filter((c) => (c.name.startsWith('receipt.') && c.name !== 'receipt.event') || c.name === 'policy.model');
    expect(receipt.map((c) => c.name)).toEqual(result.exchanges[0]!.checks.map((c) => c.name));
    expect(marks(receipt).filter((m) => !m.startsWith('PASS'))).toEqual(['FAIL policy.model']);
    // The policy lists no model: the core holds the receipt's model to it, as it holds the bytes and the start evidence.
    expect(receipt.find((c) => c.name === 'receipt.response_hash')?.detail).toContain(sha256Tagged(response));
    expect(receipt.find((c) => c.name === 'receipt.attestation_hash')?.ok).toBe(true);
    const tampered = await verifyService(
      fetched({
        attestation: doc,
        jwks: { keys: [signer.publicJwk] },
        startAttestation: doc,
        exchanges: [{ ...exchange, response: new TextEncoder().encode('{"id":"chatcmpl-2"}') }],
      }),
      { nonce, reference: PINNED, roots: chain.roots },
    );
    expect(tampered.verdict.failed.map((c) => c.name)).toEqual(['receipt.response_hash', 'policy.model']);
  });

  it('fails a policy other than the one the enclave binds', async () => {
    const result = await verifyService(fetched({ policy: { version: 1, models: ['other'] } }), { nonce, reference: PINNED, roots: chain.roots });
    expect(result.verdict.failed.map((c) => c.name)).toEqual(['attestation.policy']);
  });

  it('does not verify a development service (tee "none") unless waived, and then only with waivers', async () => {
    const dev = { ...document, tee: 'none', evidence: null };
    const refused = await verifyService(fetched({ attestation: dev, connection: { url: new URL('http://127.0.0.1:1'), presentedTlsKeys: [] } }), { nonce });
    expect(refused.verdict.failed.map((c) => c.name)).toEqual(['attestation.tls_key', 'attestation.tee']);
    const waived = await verifyService(fetched({ attestation: dev, connection: { url: new URL('http://127.0.0.1:1'), presentedTlsKeys: [] } }), {
      nonce,
      waive: { noHardwareEnclave: 'local development' },
    });
    // Without hardware the document still answers our nonce and hashes its binding into report_data: a replayed one fails.
    expect(marks(waived.checks)).toEqual([
      'WAIVED attestation.tls_key',
      'WAIVED attestation.tee',
      'PASS attestation.nonce',
      'PASS attestation.report_data',
      'PASS attestation.jwks',
      'WAIVED attestation.manifest',
      'PASS gpu.evidence',
      'PASS attestation.policy',
    ]);
    const replayed = await verifyService(fetched({ attestation: dev, connection: { url: new URL('http://127.0.0.1:1'), presentedTlsKeys: [] } }), {
      nonce: new Uint8Array(32).fill(7),
      waive: { noHardwareEnclave: 'local development' },
    });
    expect(replayed.verdict.failed.map((c) => c.name)).toEqual(['attestation.nonce', 'attestation.report_data']);
    expect(waived.verdict.outcome).toBe('verified-with-waivers');
  });
});

describe('verifyService holds the attestation document to its shape', () => {
  const refused = async (attestation: unknown) => {
    const result = await verifyService(fetched({ attestation }), { nonce, reference: PINNED, roots: chain.roots });
    expect(result.verdict.outcome).not.toBe('verified');
    return result.checks.map((c) => `${checkMark(c)} ${c.name} — ${c.detail}`);
  };
  const refusal = (detail: string) => [`FAIL attestation.document — ${detail}`];

  it('refuses a field version 2 does not have, at the top or inside the binding, the event log or a GPU entry', async () => {
    const suffix = 'is not a field of the attestation document version 2: this verifier refuses what it cannot weigh';
    expect(await refused({ ...document, trusted: true })).toEqual(refusal(`trusted ${suffix}`));
    expect(await refused({ ...document, binding: { ...binding, debug: false } })).toEqual(refusal(`binding.debug ${suffix}`));
    const eventLog = document.event_log as Record<string, unknown>;
    expect(await refused({ ...document, event_log: { ...eventLog, runtime_events: [{ ...startEvent, note: 'x' }] } })).toEqual(
      refusal(`event_log.runtime_events[0].note ${suffix}`),
    );
    const gpu = { index: 0, arch: 'hopper', report: '', certificates: '', nonce: '00'.repeat(32), firmware: 'ok' };
    expect(await refused({ ...document, gpu_evidence: [gpu] })).toEqual(refusal(`gpu_evidence[0].firmware ${suffix}`));
    expect(await refused({ ...document, binding: { ...binding, key_origin: { ...binding.key_origin, receipt: { origin: 'generated', hsm: 1 } } } })).toEqual(
      refusal(`binding.key_origin.receipt.hsm ${suffix}`),
    );
  });

  it('refuses lists past their ceiling before checking any entry', async () => {
    const gpus = Array.from({ length: 65 }, (_, index) => ({ index, arch: 'hopper', report: '', certificates: '', nonce: '00'.repeat(32) }));
    expect(await refused({ ...document, gpu_evidence: gpus })).toEqual(refusal('gpu_evidence lists 65 GPU reports, more than the 64 this verifier accepts'));
    const eventLog = document.event_log as Record<string, unknown>;
    const events = Array.from({ length: 4097 }, () => startEvent);
    expect(await refused({ ...document, event_log: { ...eventLog, runtime_events: events } })).toEqual(
      refusal('event_log.runtime_events lists 4097 runtime events, more than the 4096 this verifier accepts'),
    );
    expect(await refused({ ...document, binding: { ...binding, gpu_evidence_sha256: Array.from({ length: 65 }, () => '00'.repeat(32)) } })).toEqual(
      refusal('binding.gpu_evidence_sha256 lists 65 GPU reports, more than the 64 this verifier accepts'),
    );
    const keys = Array.from({ length: 65 }, () => jwks.keys[0]);
    expect(await refused({ ...document, binding: { ...binding, jwks: { keys } } })).toEqual(
      refusal('binding.jwks.keys lists 65 keys, more than the 64 this verifier accepts'),
    );
  });

  it('refuses a start document with an unknown field too', async () => {
    const result = await verifyService(fetched({ startAttestation: { ...document, extra: 1 } }), { nonce, reference: PINNED, roots: chain.roots });
    expect(result.checks.map((c) => c.name)).toEqual(['attestation.document']);
  });

  it('accepts a JWK member it does not know (RFC 7517: ignored)', async () => {
    const keys = [{ ...(jwks.keys[0] as object), x5t: 'abc' }];
    const result = await verifyService(fetched({ attestation: { ...document, binding: { ...binding, jwks: { keys } } } }), {
      nonce,
      reference: PINNED,
      roots: chain.roots,
    });
    expect(result.checks.find((c) => c.name === 'attestation.document')).toBeUndefined();
  });
});
