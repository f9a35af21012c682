import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import koffi from 'koffi';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { attest } from '../../src/client/attest.ts';
import { AttestationError, createAttestedFetch } from '../../src/client/index.ts';
import { gpuEvidenceSha256, reportDataV2, START_NONCE, type AttestationDocumentV2, type GpuEvidence } from '../../src/protocol/attestation.ts';
import { checkMark, type Check } from '../../src/verify/check.ts';
import { DEFAULT_GPU_TRUST_ROOTS, type GpuTrustRoots } from '../../src/verify/gpu/index.ts';
import type { ReferenceValues } from '../../src/verify/reference/reference-values.ts';
import { startForgingProxy, type ForgingProxy } from '../support/forging-proxy.ts';
import { ocspResponse } from '../support/ocsp-fixtures.ts';
import {
  createRimTestChain,
  gpuEntry,
  realChainPem,
  realReport,
  rimMatchingReport,
  rimText,
  signRim,
  VECTOR_NONCE,
  type RimTestChain,
} from '../support/gpu-fixtures.ts';
import { startTestEngine, type TestEngine } from '../support/test-engine.ts';
import { startTestSigil, type TestSigil } from '../support/sigil.ts';

/** The attested client verifies the GPU evidence of the fresh document, with the real H100 report of nvtrust. */
const work = mkdtempSync(join(tmpdir(), 'sigil-attested-gpu-'));
const file = (name: string, content: string) => {
  writeFileSync(join(work, name), content);
  return join(work, name);
};
const marks = (checks: Check[]) => Object.fromEntries(checks.filter((c) => c.name.startsWith('gpu')).map((c) => [c.name, checkMark(c)]));
const failed = (checks: readonly Check[]) => checks.filter((c) => checkMark(c) === 'FAIL').map((c) => c.name);
const detail = (checks: readonly Check[], name: string) => checks.find((c) => c.name === name)?.detail ?? `no check ${name}`;

// The stand-in libnvidia-ml of test/support/fake-nvml answers the real H100 report and chain of test/vectors/nvidia.
const FAKE_NVML = join(import.meta.dirname, '..', 'support', 'fake-nvml', 'fake-nvml.c');
let engine: TestEngine;
/** Sigil with a GPU (through the stand-in NVML), and Sigil without one; both development services (tee none). */
let gpuSigil: TestSigil;
let plainSigil: TestSigil;
/** In front of each: relays, sees the nonces asked, and changes the GPU evidence of a fresh document where a test forges one. */
let gpuProxy: ForgingProxy;
let plainProxy: ForgingProxy;
let chain: RimTestChain;
let gpuRoots: GpuTrustRoots;
/** The nonce the real report answers: the one a client must send for the report to be fresh for it. */
const vectorNonce = new Uint8Array(Buffer.from(VECTOR_NONCE, 'hex'));

beforeAll(async () => {
  const library = join(work, 'libnvidia-ml.so.1');
  execFileSync('gcc', ['-shared', '-fPIC', '-Wall', '-Werror', '-o', library, FAKE_NVML]);
  writeFileSync(join(work, 'chain.pem'), realChainPem());
  const configure = koffi.load(library).func('int fakeNvmlConfigure(const char *report, const char *certs, uint32_t gpus, uint32_t cc)');
  const answer = (report: Uint8Array) => {
    writeFileSync(join(work, 'report.bin'), report);
    expect(configure(join(work, 'report.bin'), join(work, 'chain.pem'), 1, 1)).toBe(0);
  };
  // A recorded report cannot sign another nonce, and Sigil refuses a GPU answer for another nonce than it asked: for the start
  // evidence the stand-in answers a copy carrying the all-zero nonce (unsigned; nothing here verifies the start evidence's GPU).
  const forStart = Buffer.from(realReport());
  forStart.set(START_NONCE, 4);
  answer(forStart);
  engine = await startTestEngine({ modelNames: ['m'] });
  gpuSigil = await startTestSigil({
    upstreams: { e: { url: engine.baseUrl } },
    models: [{ id: 'm' }],
    // auto, not required: required verifies every report it collects, and the start report's signature no longer holds.
    config: { attestation: { provider: 'none', gpu: 'auto', nvml_library: library }, log: { level: 'silent' } },
  });
  answer(realReport());
  plainSigil = await startTestSigil({ upstreams: { e: { url: engine.baseUrl } }, models: [{ id: 'm' }], config: { log: { level: 'silent' } } });
  gpuProxy = await startForgingProxy(gpuSigil.url);
  plainProxy = await startForgingProxy(plainSigil.url);
  chain = await createRimTestChain();
  gpuRoots = { deviceIdentity: DEFAULT_GPU_TRUST_ROOTS.deviceIdentity, rim: [chain.rootPem] };
}, 60_000);
afterAll(async () => {
  await gpuProxy.close();
  await plainProxy.close();
  await gpuSigil.close(0);
  await plainSigil.close(0);
  await engine.close();
  rmSync(work, { recursive: true, force: true });
});
afterEach(() => {
  gpuProxy.reset();
  plainProxy.reset();
});

/** The nonces the client asked fresh reports for through `proxy`, oldest first. */
const asked = (proxy: ForgingProxy) =>
  proxy.requests.filter((line) => line.startsWith('GET /v1/verify/attestation?nonce=')).map((line) => /nonce=([0-9a-f]+)/.exec(line)![1]!);
/**
 * Forges the fresh documents `proxy` relays: their GPU evidence becomes `gpu`, bound as `bound` (default: its hashes), and
 * report_data is remade for that binding, as anyone can for a document no hardware signs (tee none).
 */
const forgeGpu = (proxy: ForgingProxy, gpu: GpuEvidence[], bound = gpu.map(gpuEvidenceSha256)) => {
  proxy.rewrite = (method, path) =>
    path.startsWith('/v1/verify/attestation?nonce=')
      ? (body) => {
          const doc = JSON.parse(body.toString()) as AttestationDocumentV2;
          doc.gpu_evidence = gpu;
          doc.binding.gpu_evidence_sha256 = bound;
          doc.report_data = Buffer.from(reportDataV2(Buffer.from(doc.nonce, 'hex'), doc.binding)).toString('hex');
          return Buffer.from(JSON.stringify(doc));
        }
      : undefined;
};
const chatRequests = () => engine.requests.filter((r) => r.path === '/v1/chat/completions').length;

const matchingRims = (change?: (index: number, value: string) => string) => ({
  gpu: {
    rims: [
      file(`driver-${change === undefined ? 'ok' : 'bad'}.swidtag`, signRim(rimMatchingReport(rimText('driver-rim-test.swidtag'), '550.90.07', change), chain)),
      file('vbios.swidtag', signRim(rimMatchingReport(rimText('vbios-rim-test.swidtag'), '96.00.9F.00.01'), chain)),
    ],
  },
});

describe('attest() on a document carrying the real H100 report', () => {
  it('checks revocation against the recorded OCSP responses the reference values name: an unreadable file and an answer NVIDIA did not sign both fail', async () => {
    // Not the first certificate, the GPU's own (issued by its firmware): revocation is asked about the certificates above it.
    const [, device, issuer] = realChainPem()
      .match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)!
      .map((pem) => new X509Certificate(pem));
    const now = Date.now();
    const forged = ocspResponse({
      cert: new Uint8Array(device!.raw),
      issuer: new Uint8Array(issuer!.raw),
      signer: generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey,
      thisUpdate: new Date(now - 3600_000),
      nextUpdate: new Date(now + 3600_000),
    });
    writeFileSync(join(work, 'forged.der'), forged);
    const reference = { gpu: { ocsp: [join(work, 'absent.der'), join(work, 'forged.der')] } };
    const result = await attest({ baseURL: gpuSigil.url, freshReport: true, reference, waive: { noHardwareEnclave: 'a test service' }, nonce: vectorNonce });
    expect(failed(result.checks)).toEqual(['gpu.ocsp', 'gpu[0].revocation']);
    expect(detail(result.checks, 'gpu.ocsp')).toMatch(/^the OCSP response .*absent\.der named by the reference values cannot be read \(ENOENT\)/);
    expect(detail(result.checks, 'gpu[0].revocation')).toContain('nor by an OCSP signer it certified');
  });

  it('verifies it for the nonce sent: binding, signature, chain, FWID, nonce; measurements not pinned without RIMs', async () => {
    const result = await attest({ baseURL: gpuProxy.url, freshReport: true, waive: { noHardwareEnclave: 'a test service' }, nonce: vectorNonce });
    expect(asked(gpuProxy).at(-1)).toBe(VECTOR_NONCE);
    expect(failed(result.checks)).toEqual([]);
    expect(result.verdict.outcome).toBe('not-verified');
    expect(result.verdict.notPinned.map((c) => c.name)).toEqual(['gpu[0].measurements', 'gpu[0].revocation']);
    expect(marks(result.checks)).toEqual({
      'gpu.binding': 'PASS',
      'gpu[0].report': 'PASS',
      'gpu[0].certificates': 'PASS',
      'gpu[0].signature': 'PASS',
      'gpu[0].chain': 'PASS',
      'gpu[0].root': 'PASS',
      'gpu[0].fwid': 'PASS',
      'gpu[0].nonce': 'PASS',
      'gpu[0].measurements': '----',
      'gpu[0].revocation': '----',
    });
    expect(result.gpus.map((g) => [g.index, g.arch, g.driverVersion, g.vbiosVersion, Object.keys(g.measurements).length])).toEqual([
      [0, 'hopper', '550.90.07', '96.00.9F.00.01', 64],
    ]);
  });

  it('compares the measurements with the RIMs of reference.gpu.rims, and fails one pinned differently', async () => {
    const good = await attest({
      baseURL: gpuSigil.url,
      freshReport: true,
      waive: { noHardwareEnclave: 'a test service' },
      nonce: vectorNonce,
      reference: matchingRims(),
      gpuRoots,
    });
    expect(failed(good.checks)).toEqual([]);
    expect(marks(good.checks)).toMatchObject({
      'gpu.rim[0].chain': 'PASS',
      'gpu.rim[1].chain': 'PASS',
      'gpu[0].driver_rim': 'PASS',
      'gpu[0].vbios_rim': 'PASS',
      'gpu[0].measurements': 'PASS',
    });
    const bad = await attest({
      baseURL: gpuSigil.url,
      freshReport: true,
      waive: { noHardwareEnclave: 'a test service' },
      nonce: vectorNonce,
      reference: matchingRims((i, v) => (i === 33 ? `${v.slice(0, -2)}00` : v)),
      gpuRoots,
    });
    expect(bad.verdict.outcome).toBe('not-verified');
    expect(failed(bad.checks)).toEqual(['gpu[0].measurements']);
  });

  it("does not use RIMs signed by a root other than NVIDIA's", async () => {
    const result = await attest({
      baseURL: gpuSigil.url,
      freshReport: true,
      waive: { noHardwareEnclave: 'a test service' },
      nonce: vectorNonce,
      reference: matchingRims(),
    });
    expect(result.verdict.outcome).toBe('not-verified');
    expect(failed(result.checks)).toEqual(['gpu.rim[0].chain', 'gpu.rim[1].chain', 'gpu[0].driver_rim', 'gpu[0].vbios_rim', 'gpu[0].measurements']);
  });

  it("takes the RIMs and OCSP answers of a collateral bundle's NVIDIA part as it takes those the reference values name", async () => {
    const rims = matchingRims().gpu.rims.map((path) => readFileSync(path, 'utf8'));
    const run = (reference?: ReferenceValues) =>
      attest({
        baseURL: gpuSigil.url,
        freshReport: true,
        waive: { noHardwareEnclave: 'a test service' },
        nonce: vectorNonce,
        gpuRoots,
        collateral: { intel: {}, amd: {}, nvidia: { rims, ocsp: [] } },
        ...(reference === undefined ? {} : { reference }),
      });
    // The bundle holds no answer about the RIM signers or the device CAs: revocation fails closed instead of staying unpinned, and unchecked RIMs are not used.
    const strict = await run();
    expect(failed(strict.checks)).toEqual([
      'gpu.rim[0].revocation',
      'gpu.rim[1].revocation',
      'gpu[0].driver_rim',
      'gpu[0].vbios_rim',
      'gpu[0].measurements',
      'gpu[0].revocation',
    ]);
    expect(detail(strict.checks, 'gpu[0].revocation')).toMatch(/^not checked: no recorded OCSP response covers GH100 A01 GSP BROM; /);
    const waived = await run({ gpu: { ocsp_allow_missing: true } });
    expect(failed(waived.checks)).toEqual([]);
    expect(marks(waived.checks)).toMatchObject({
      'gpu[0].driver_rim': 'PASS',
      'gpu[0].vbios_rim': 'PASS',
      'gpu[0].measurements': 'PASS',
      'gpu[0].revocation': 'WAIVED',
    });
  });

  it('fails a report with a measurement byte changed, and hashes the binding does not list', async () => {
    const tampered = realReport();
    tampered[52] = tampered[52]! ^ 0x01;
    forgeGpu(gpuProxy, [gpuEntry(tampered)]);
    const result = await attest({ baseURL: gpuProxy.url, freshReport: true, waive: { noHardwareEnclave: 'a test service' }, nonce: vectorNonce });
    expect(failed(result.checks)).toEqual(['gpu[0].signature']);
    forgeGpu(gpuProxy, [gpuEntry()], ['00'.repeat(32)]);
    const unbound = await attest({ baseURL: gpuProxy.url, freshReport: true, waive: { noHardwareEnclave: 'a test service' }, nonce: vectorNonce });
    expect(failed(unbound.checks)).toEqual(['gpu.binding']);
  });

  it('fails gpu.rims when a RIM file cannot be read', async () => {
    const result = await attest({
      baseURL: gpuSigil.url,
      freshReport: true,
      waive: { noHardwareEnclave: 'a test service' },
      nonce: vectorNonce,
      reference: { gpu: { rims: [join(work, 'absent.swidtag')] } },
    });
    expect(result.verdict.outcome).toBe('not-verified');
    expect(failed(result.checks)).toContain('gpu.rims');
    expect(detail(result.checks, 'gpu.rims')).toContain('absent.swidtag named by the reference values cannot be read (ENOENT)');
  });
});

describe('createAttestedFetch and GPU evidence', () => {
  it('refuses a service whose GPU report was made for another nonce than the fresh one it sent, and sends nothing', async () => {
    // A recorded report replayed into a document for our nonce, bound as Sigil binds it: only the report's own nonce gives it away.
    forgeGpu(plainProxy, [gpuEntry()]);
    const before = chatRequests();
    const error = await createAttestedFetch({ baseURL: `${plainProxy.url}/v1`, allowNoTee: true, freshReport: true }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(AttestationError);
    const checks = (error as AttestationError).checks;
    expect(failed(checks)).toEqual(['gpu[0].nonce']);
    const sent = asked(plainProxy).at(-1)!;
    expect(sent).toMatch(/^[0-9a-f]{64}$/);
    expect(sent).not.toBe(VECTOR_NONCE);
    expect(detail(checks, 'gpu[0].nonce')).toBe(
      `the signed request carries nonce ${VECTOR_NONCE}, not yours (${sent}): the report is replayed or made for someone else`,
    );
    expect((error as Error).message).toContain('gpu[0].nonce');
    expect(chatRequests()).toBe(before);
  });

  it('accepts a service with no GPU evidence with a check saying so, unless reference values pin RIMs', async () => {
    const attested = await createAttestedFetch({ baseURL: `${plainSigil.url}/v1`, allowNoTee: true, freshReport: true });
    await attested.close();
    expect(marks(attested.attestation.checks)).toEqual({ 'gpu.evidence': 'PASS' });
    expect(detail(attested.attestation.checks, 'gpu.evidence')).toBe('the evidence holds no GPU report: it says nothing about any GPU the model may run on');
    expect(attested.attestation.gpus).toEqual([]);
    const error = await createAttestedFetch({ baseURL: `${plainSigil.url}/v1`, allowNoTee: true, reference: matchingRims(), gpuRoots }).catch(
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(AttestationError);
    expect(failed((error as AttestationError).checks)).toEqual(['gpu.evidence']);
  });
});
