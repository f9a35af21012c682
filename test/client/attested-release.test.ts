import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttestedFetch } from '../../src/client/index.ts';
import { checkMark } from '../../src/verify/check.ts';
import { createAmdTestChain, SNP_PLATFORM_VALUES_YAML, type AmdTestChain } from '../support/evidence-fixtures.ts';
import { keyedSnpRelease } from '../release/release-fixtures.ts';
import { startSnpSigil, type TeeSigil } from '../support/tee-sigil.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';

const DAY = 86_400_000;
const work = mkdtempSync(join(tmpdir(), 'sigil-client-release-'));
let engine: TestEngine;
beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m1'] });
});
afterAll(async () => {
  await engine.close();
  rmSync(work, { recursive: true, force: true });
});
/** Prompts that reached the engine: a refused service must have been sent none. */
const chatRequests = () => engine.requests.filter((r) => r.path === '/v1/chat/completions').length;

describe('createAttestedFetch with a release manifest as its reference values (a test AMD chain)', () => {
  const measurement = randomBytes(48);
  let chain: AmdTestChain;
  let service: TeeSigil;
  beforeAll(async () => {
    chain = await createAmdTestChain();
    service = await startSnpSigil({ engineUrl: engine.baseUrl, chain, measurement });
  });
  afterAll(async () => service.close(0));

  const keyed = (values: string, expires: Date, tamper?: string, selfMeasurement = service.manifest) => {
    const r = keyedSnpRelease(values, expires, { selfMeasurement, tamperedTo: tamper });
    return { bundle: new TextEncoder().encode(r.bundle), trust: { kind: 'key' as const, publicKey: r.publicKeyPem } };
  };

  it('accepts the service whose measurement the release lists (bundle read from a file), and verifies its receipts', async () => {
    const r = keyedSnpRelease(measurement.toString('hex'), new Date(Date.now() + DAY), { selfMeasurement: service.manifest });
    const path = join(work, 'release.sigstore.json');
    writeFileSync(path, r.bundle);
    // The platform values a release does not list stay not pinned: waived here with allowUnpinnedCode.
    const attested = await createAttestedFetch({
      baseURL: service.url,
      roots: chain.roots,
      allowUnpinnedCode: true,
      release: { bundle: path, trust: { kind: 'key', publicKey: r.publicKeyPem } },
    });
    try {
      const marks = Object.fromEntries(attested.attestation.checks.map((c) => [c.name, checkMark(c)]));
      expect(marks).toMatchObject({
        'release.bundle': 'PASS',
        'release.signer': 'PASS',
        'release.tlog': 'WAIVED',
        'release.signature': 'PASS',
        'release.identity': 'PASS',
        'release.statement': 'PASS',
        'release.expiry': 'PASS',
        'reference.values': 'PASS',
        'reference.measurement': 'PASS',
        'attestation.manifest': 'PASS',
      });
      expect(attested.attestation.verdict.outcome).toBe('verified-with-waivers');
      expect(attested.attestation.verdict.failed).toEqual([]);
      const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: service.key, maxRetries: 0, fetch: attested as unknown as typeof fetch });
      await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] });
      expect(attested.receipts.at(-1)).toMatchObject({ ok: true, stream: false });
    } finally {
      await attested.close();
    }
  });

  const refusal = async (release: ReturnType<typeof keyed>) => {
    const sent = chatRequests();
    const error = (await createAttestedFetch({ baseURL: service.url, roots: chain.roots, allowUnpinnedCode: true, release }).catch(
      (e: unknown) => e,
    )) as Error & { code?: string };
    expect(chatRequests()).toBe(sent);
    expect(error?.code).toBe('ERR_VERIFY_ATTESTATION');
    return error.message;
  };

  it('refuses the service, sending nothing, with an expired release: release.expiry', async () => {
    const message = await refusal(keyed(measurement.toString('hex'), new Date(Date.now() - DAY)));
    expect(message).toMatch(
      /^the service's attestation did not verify, so nothing was sent: NOT VERIFIED: 1 of \d+ checks failed; .*: release\.expiry: the manifest expired at /,
    );
  });

  it('refuses it with a release changed after signing: release.signature', async () => {
    const message = await refusal(keyed('ab'.repeat(48), new Date(Date.now() + DAY), measurement.toString('hex')));
    expect(message).toContain('release.signature: the signature does not match the manifest: it was altered after signing, or signed by another key');
  });

  it('refuses it with a release of other code: reference.measurement', async () => {
    const message = await refusal(keyed('ab'.repeat(48), new Date(Date.now() + DAY)));
    expect(message).toMatch(
      /: NOT VERIFIED: 1 of \d+ checks failed; .*: reference\.measurement: MEASUREMENT [0-9a-f]{96} is none of the 1 accepted reference value\(s\)/,
    );
  });

  it("refuses it when its code is not the release's self-measurement: attestation.manifest", async () => {
    const message = await refusal(keyed(measurement.toString('hex'), new Date(Date.now() + DAY), undefined, 'ab'.repeat(48)));
    expect(message).toMatch(
      /: NOT VERIFIED: 1 of \d+ checks failed; .*: attestation\.manifest: manifest [0-9a-f]{96} is not among the reference values' (ab){48}: something that decides behaviour differs/,
    );
  });

  it('refuses reference values that pin what the release states, naming the key', async () => {
    const error = await createAttestedFetch({
      baseURL: service.url,
      roots: chain.roots,
      reference: { sigil: { manifest_sha384: [service.manifest] } },
      release: keyed('ab'.repeat(48), new Date(Date.now() + DAY)),
    }).catch((e: unknown) => e as Error);
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toBe(
      'sigil.manifest_sha384: is stated by the release manifest: next to a release, reference values may only add what a release does not state (machine allow-lists, TCB floors, policy)',
    );
  });

  it('takes reference values next to the release for what it does not state: a machine not on their allow-list is refused (snp.instance)', async () => {
    const sent = chatRequests();
    const release = keyed(measurement.toString('hex'), new Date(Date.now() + DAY));
    const error = (await createAttestedFetch({
      baseURL: service.url,
      roots: chain.roots,
      allowUnpinnedCode: true,
      release,
      reference: { snp: { chip_id: ['c2'.repeat(64)] } },
    }).catch((e: unknown) => e)) as Error;
    expect(chatRequests()).toBe(sent);
    expect(error.message).toMatch(
      /: NOT VERIFIED: 1 of \d+ checks failed; .*: snp\.instance: CHIP_ID c1c1c1c1c1c1c1c1\.\.\. is not one of the 1 allowed machine\(s\)/,
    );
  });
});

describe('createAttestedFetch with a keyed release and reference values for the platform (a test Milan chain)', () => {
  const measurement = randomBytes(48);
  let chain: AmdTestChain;
  let service: TeeSigil;
  beforeAll(async () => {
    chain = await createAmdTestChain('Milan');
    service = await startSnpSigil({ engineUrl: engine.baseUrl, chain, measurement, milan: true });
  });
  afterAll(async () => service.close(0));

  it('sends requests without allowUnpinnedCode: the release pins the code, the reference values the platform, and only release.tlog is waived', async () => {
    const r = keyedSnpRelease(measurement.toString('hex'), new Date(Date.now() + DAY), { selfMeasurement: service.manifest });
    const path = join(work, 'platform.yaml');
    writeFileSync(path, SNP_PLATFORM_VALUES_YAML);
    const attested = await createAttestedFetch({
      baseURL: service.url,
      roots: chain.roots,
      reference: path,
      release: { bundle: new TextEncoder().encode(r.bundle), trust: { kind: 'key', publicKey: r.publicKeyPem } },
    });
    try {
      expect(attested.attestation.verdict.outcome).toBe('verified-with-waivers');
      expect(attested.attestation.verdict.waived.map((c) => c.name)).toEqual(['release.tlog']);
      expect(attested.attestation.verdict.notPinned).toEqual([]);
      const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: service.key, maxRetries: 0, fetch: attested as unknown as typeof fetch });
      await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] });
      expect(attested.receipts.at(-1)).toMatchObject({ ok: true, stream: false });
    } finally {
      await attested.close();
    }
  });
});
