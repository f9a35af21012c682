import { randomBytes } from 'node:crypto';
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { gpuEvidenceSha256, reportDataV2, type AttestationDocumentV2, type GpuEvidence } from '../../src/protocol/attestation.ts';
import { startConnect, type RunningConnect } from '../../src/connect/start.ts';
import { amdTestCrl, createAmdTestChain, buildSnpReport, pinnedSnpReference, type AmdTestChain } from '../support/evidence-fixtures.ts';
import { startForgingProxy, type ForgingProxy } from '../support/forging-proxy.ts';
import { gpuEntry, VECTOR_NONCE } from '../support/gpu-fixtures.ts';
import { startSnpSigil, type TeeSigil } from '../support/tee-sigil.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** sigil connect renews its verdict (docs/connect.md, "Re-attestation"), on a clock the test moves, and asks for fresh evidence when told. */
const MINUTE = 60_000;
const START = new Date('2026-03-01T12:00:00Z');
let clock = START;
const now = () => clock;
const advance = (ms: number) => (clock = new Date(clock.getTime() + ms));

let engine: TestEngine;
let plain: TestSigil;
let proxy: ForgingProxy;
let chain: AmdTestChain;
const measurement = randomBytes(48);
/** The report data of every SEV-SNP report the stand-in hardware made, the start evidence first. */
const reports: Uint8Array[] = [];
let snp: TeeSigil;
const running: RunningConnect[] = [];
const listen = { host: '127.0.0.1', port: 0 };

beforeAll(async () => {
  engine = await startTestEngine({ modelNames: ['m'] });
  plain = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }], config: { log: { level: 'silent' } } });
  proxy = await startForgingProxy(plain.url);
  chain = await createAmdTestChain('Milan');
  snp = await startSnpSigil({
    engineUrl: engine.baseUrl,
    chain,
    measurement,
    milan: true,
    model: 'm',
    report: (reportData) => {
      reports.push(reportData);
      return buildSnpReport({ reportData, measurement, cpuid: { family: 0x19, model: 0x01 } }, chain.vcekKey);
    },
  });
}, 60_000);
afterAll(async () => {
  await proxy.close();
  await plain.close(0);
  await snp.close(0);
  await engine.close();
});
afterEach(async () => {
  proxy.reset();
  clock = START;
  for (const connect of running.splice(0)) await connect.close();
});

const attestations = () => proxy.requests.filter((line) => line.startsWith('GET /v1/verify/attestation?')).length;
const chatRequests = () => engine.requests.filter((r) => r.path === '/v1/chat/completions').length;

async function connectToPlain(extra: { reattestEvery?: number; freshReport?: boolean } = {}): Promise<{ connect: RunningConnect; app: OpenAI }> {
  const connect = await startConnect({ service: proxy.url, listen, allowNoTee: true, allowInsecureHttp: true, now, ...extra });
  running.push(connect);
  return { connect, app: new OpenAI({ baseURL: `${connect.url}/v1`, apiKey: plain.key, maxRetries: 0 }) };
}

const ask = (app: OpenAI) => app.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hello' }] });

describe('sigil connect re-attests on a schedule', () => {
  it('renews a verdict older than --reattest-every before the next request goes out, and /status shows its age and the next one', async () => {
    const { connect, app } = await connectToPlain({ reattestEvery: 30 * MINUTE });
    expect(connect.status().renewal).toEqual({ verdict_age_seconds: 0, next_reattestation: '2026-03-01T12:30:00.000Z' });
    advance(10 * MINUTE);
    await ask(app);
    expect(attestations()).toBe(1);
    expect(connect.status().renewal).toEqual({ verdict_age_seconds: 600, next_reattestation: '2026-03-01T12:30:00.000Z' });
    advance(20 * MINUTE);
    const completion = await ask(app);
    expect(completion.choices[0]?.message.content).toBe(engine.reply);
    expect(attestations()).toBe(2);
    expect(connect.status().attested_at).toBe('2026-03-01T12:30:00.000Z');
    expect(connect.status().renewal).toEqual({ verdict_age_seconds: 0, next_reattestation: '2026-03-01T13:00:00.000Z' });
  });

  it('trusts a verdict for one hour by default', async () => {
    const { connect } = await connectToPlain();
    expect(connect.status().renewal.next_reattestation).toBe('2026-03-01T13:00:00.000Z');
  });

  it('a re-attestation that fails after the interval: every answer refused with a 502 naming the check, nothing sent, until one succeeds', async () => {
    const { connect, app } = await connectToPlain({ reattestEvery: 30 * MINUTE });
    await ask(app);
    // The service now serves a policy its attestation does not bind.
    proxy.forge = (method, path) =>
      method === 'GET' && path === '/v1/verify/policy' ? { status: 200, headers: { 'content-type': 'application/json' }, body: '{"models":[]}' } : undefined;
    advance(30 * MINUTE);
    const before = chatRequests();
    for (let i = 0; i < 2; i++) {
      const refused = await ask(app).catch((e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
      expect(refused).toBeInstanceOf(OpenAI.APIError);
      expect((refused as InstanceType<typeof OpenAI.APIError>).status).toBe(502);
      expect((refused as InstanceType<typeof OpenAI.APIError>).code).toBe('attestation_failed');
      expect((refused as InstanceType<typeof OpenAI.APIError>).param).toBe('attestation.policy');
    }
    expect(chatRequests()).toBe(before);
    const failed = connect.status().renewal.failed;
    expect(failed?.at).toBe('2026-03-01T12:30:00.000Z');
    expect(failed?.check).toBe('attestation.policy');
    expect(failed?.detail).toMatch(
      /^the service's attestation did not verify, so nothing was sent: .*attestation\.policy: the policy served hashes to sha256:/,
    );
    proxy.reset();
    const completion = await ask(app);
    expect(completion.choices[0]?.message.content).toBe(engine.reply);
    expect(connect.status().renewal.failed).toBeUndefined();
    expect(chatRequests()).toBe(before + 1);
  });
});

/**
 * Forges the fresh documents the proxy relays: their GPU evidence becomes `gpu` (a report recorded on another machine, for
 * another nonce), bound as Sigil binds it, report_data remade, as anyone can for a document no hardware signs (tee none).
 */
const relayGpu = (gpu: GpuEvidence[]) => {
  proxy.rewrite = (_method, path) =>
    path.startsWith('/v1/verify/attestation?nonce=') && !path.includes('proof=signature')
      ? (body) => {
          const doc = JSON.parse(body.toString()) as AttestationDocumentV2;
          doc.gpu_evidence = gpu;
          doc.binding.gpu_evidence_sha256 = gpu.map(gpuEvidenceSha256);
          doc.report_data = Buffer.from(reportDataV2(Buffer.from(doc.nonce, 'hex'), doc.binding)).toString('hex');
          return Buffer.from(JSON.stringify(doc));
        }
      : undefined;
};

describe('sigil connect re-attests before the collateral its verdict used expires', () => {
  it("is due at the AMD CRL's nextUpdate when that comes before the interval", async () => {
    const host = await startSnpSigil({ engineUrl: engine.baseUrl, chain, measurement, milan: true, model: 'm', withoutCrl: true });
    try {
      const nextUpdate = new Date(Math.floor(Date.now() / 1000) * 1000 + 20 * MINUTE);
      const crl = await amdTestCrl(chain, [], { thisUpdate: new Date(Date.now() - 60 * MINUTE), nextUpdate });
      const connect = await startConnect({
        service: host.url,
        listen,
        roots: chain.roots,
        reference: pinnedSnpReference(measurement, host.manifest),
        collateral: { intel: {}, amd: { crl: new Uint8Array(crl.rawData) } },
      });
      running.push(connect);
      expect(connect.status().checks.find((c) => c.name === 'snp.crl')?.result).toBe('PASS');
      expect(connect.status().renewal.next_reattestation).toBe(nextUpdate.toISOString());
    } finally {
      await host.close(0);
    }
  });
});

describe('sigil connect --fresh-report', () => {
  it("binds a new CPU report to connect's own nonce at start and at each re-attestation", async () => {
    const pinned = pinnedSnpReference(measurement, snp.manifest);
    const before = reports.length;
    const connect = await startConnect({ service: snp.url, listen, roots: chain.roots, reference: pinned, freshReport: true, reattestEvery: MINUTE, now });
    running.push(connect);
    expect(reports.length).toBe(before + 1);
    expect(connect.status().freshness).toBe("fresh: the CPU report and every GPU report answer connect's own nonce, at start and at each re-attestation");
    const app = new OpenAI({ baseURL: `${connect.url}/v1`, apiKey: snp.key, maxRetries: 0 });
    advance(MINUTE);
    await ask(app);
    expect(reports.length).toBe(before + 2);
    expect(Buffer.from(reports.at(-1)!).equals(Buffer.from(reports.at(-2)!))).toBe(false);
  });

  it('without it, no new report is made and /status says GPU freshness rests on the start evidence', async () => {
    const pinned = pinnedSnpReference(measurement, snp.manifest);
    const before = reports.length;
    const connect = await startConnect({ service: snp.url, listen, roots: chain.roots, reference: pinned, now });
    running.push(connect);
    expect(reports.length).toBe(before);
    expect(connect.status().freshness).toBe(
      "the CPU and GPU reports are the service's start evidence, reused: connect's nonce is signed by the receipt key that evidence binds, so GPU freshness rests on the start evidence (--fresh-report asks for new reports)",
    );
  });

  it('refuses a GPU report relayed from another run (made for another nonce), sending nothing', async () => {
    relayGpu([gpuEntry()]);
    const refused = await connectToPlain({ freshReport: true }).catch(
      (e: unknown) => e as Error & { checks?: Array<{ name: string; ok: boolean; detail: string }> },
    );
    expect(refused).toBeInstanceOf(Error);
    const failed = refused as Error & { checks: Array<{ name: string; ok: boolean; waived?: string; detail: string }> };
    expect(failed.checks.filter((c) => !c.ok && c.waived === undefined).map((c) => c.name)).toEqual(['gpu[0].nonce']);
    expect(failed.checks.find((c) => c.name === 'gpu[0].nonce')?.detail).toMatch(
      new RegExp(`^the signed request carries nonce ${VECTOR_NONCE}, not yours \\([0-9a-f]{64}\\): the report is replayed or made for someone else$`),
    );
  });
});
