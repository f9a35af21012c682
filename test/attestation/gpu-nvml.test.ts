import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import koffi from 'koffi';
import { beforeAll, describe, expect, it } from 'vitest';
import { makeAttestationDocument } from '../../src/attestation/document.ts';
import { createGpuCollector, GpuAttestationUnavailable, type GpuAttestationMode } from '../../src/attestation/gpu/gpu-evidence.ts';
import { createNoneProvider } from '../../src/attestation/none.ts';
import { verifyGpuEvidence } from '../../src/verify/gpu/index.ts';
import { realChainPem, realReport, VECTOR_NONCE, VECTOR_TIME } from '../support/gpu-fixtures.ts';

const SOURCE = join(import.meta.dirname, '..', 'support', 'fake-nvml', 'fake-nvml.c');
let library: string;
let dir: string;
let configure: (gpus: number, cc: number, report?: Buffer) => void;
let lastNonce: () => string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'sigil-fake-nvml-'));
  library = join(dir, 'libnvidia-ml.so.1');
  execFileSync('gcc', ['-shared', '-fPIC', '-Wall', '-Werror', '-o', library, SOURCE]);
  writeFileSync(join(dir, 'report.bin'), realReport());
  writeFileSync(join(dir, 'chain.pem'), realChainPem());
  const fake = koffi.load(library);
  const configureFn = fake.func('int fakeNvmlConfigure(const char *report, const char *certs, uint32_t gpus, uint32_t cc)');
  const lastNonceFn = fake.func('void fakeNvmlLastNonce(_Out_ uint8_t *out)');
  configure = (gpus, cc, report = realReport()) => {
    writeFileSync(join(dir, 'report.bin'), report);
    expect(configureFn(join(dir, 'report.bin'), join(dir, 'chain.pem'), gpus, cc)).toBe(0);
  };
  lastNonce = () => {
    const out = Buffer.alloc(32);
    lastNonceFn(out);
    return out.toString('hex');
  };
});

function collector(mode: GpuAttestationMode, nvmlLibrary = library) {
  const logged: string[] = [];
  const logger = { info: (m: string) => logged.push(`info: ${m}`), warn: (m: string) => logged.push(`warn: ${m}`) } as never;
  // The recorded chain is checked at the time the report was made, as every verifier test of it does.
  return { logged, make: () => createGpuCollector({ mode, nvmlLibrary, logger, verification: { at: VECTOR_TIME } }) };
}

describe('GPU evidence through NVML (a stand-in libnvidia-ml built from test/support/fake-nvml)', () => {
  it("collects every GPU's report and chain for the nonce, through the FFI, as the verifier accepts them", async () => {
    // The stand-in returns the one recorded (really signed) H100 report for every device, and only one real report
    // answers VECTOR_NONCE: one GPU is what the verifier can accept; two identical ones are one GPU counted twice.
    configure(1, 1);
    const { make, logged } = collector('required');
    const gpus = make();
    expect(gpus.gpus).toBe(1);
    const entries = await gpus.collect(Buffer.from(VECTOR_NONCE, 'hex'));
    expect(lastNonce()).toBe(VECTOR_NONCE);
    expect(entries).toEqual([
      { index: 0, arch: 'hopper', report: realReport().toString('base64'), certificates: Buffer.from(realChainPem()).toString('base64'), nonce: VECTOR_NONCE },
    ]);
    const { checks } = verifyGpuEvidence(entries, { nonce: VECTOR_NONCE, at: VECTOR_TIME });
    expect(checks.filter((c) => !c.ok)).toEqual([]);
    for (const what of ['report', 'signature', 'chain', 'root', 'fwid', 'nonce']) expect(checks.find((c) => c.name === `gpu[0].${what}`)?.ok).toBe(true);
    expect(checks.map((c) => c.name)).not.toContain('gpu.evidence'); // made only when there are two entries or more
    expect(logged).toEqual([]);
    gpus.close();
  });

  it('asks every GPU NVML lists, each under its own index (auto does not verify)', async () => {
    configure(2, 1);
    const { make, logged } = collector('auto');
    const gpus = make();
    expect(gpus.gpus).toBe(2);
    const entries = await gpus.collect(Buffer.from(VECTOR_NONCE, 'hex'));
    expect(lastNonce()).toBe(VECTOR_NONCE);
    expect(entries).toEqual(
      [0, 1].map((index) => ({
        index,
        arch: 'hopper',
        report: realReport().toString('base64'),
        certificates: Buffer.from(realChainPem()).toString('base64'),
        nonce: VECTOR_NONCE,
      })),
    );
    expect(logged).toEqual([]);
    gpus.close();
  });

  it('required refuses two GPUs that return the same report: one GPU would be counted twice', async () => {
    configure(2, 1);
    const gpus = collector('required').make();
    const collected = gpus.collect(Buffer.from(VECTOR_NONCE, 'hex'));
    await expect(collected).rejects.toThrow(GpuAttestationUnavailable);
    await expect(collected).rejects.toThrow(
      'attestation.gpu is required but the GPU evidence NVML returned does not verify (gpu.evidence: GPU entries 0 and 1 carry the same report: one GPU would be counted twice)',
    );
    gpus.close();
  });

  it('passes the nonce it is given to the GPU and refuses a report for another one', async () => {
    configure(1, 1);
    const gpus = collector('auto').make();
    const other = 'ab'.repeat(32);
    await expect(gpus.collect(Buffer.from(other, 'hex'))).rejects.toThrow(`GPU 0 answered nonce ${VECTOR_NONCE} instead of ${other}`);
    expect(lastNonce()).toBe(other);
    gpus.close();
  });

  it('binds the hash of each report in the attestation document', async () => {
    configure(1, 1);
    const gpus = collector('required').make();
    const { document } = await makeAttestationDocument(
      { provider: createNoneProvider(), collectGpuEvidence: gpus.collect, eventLog: null },
      { jwks: { keys: [] }, policyHash: 'sha256:' + '0'.repeat(64), tlsSpkiSha256: null, hpkeKeyConfig: null },
      Buffer.from(VECTOR_NONCE, 'hex'),
    );
    expect(document.gpu_evidence).toHaveLength(1);
    expect(document.binding.gpu_evidence_sha256).toEqual([createHash('sha256').update(realReport()).digest('hex')]);
    gpus.close();
  });

  it('required serves only reports the verifier accepts: a report whose signature does not hold is refused, naming the check', async () => {
    configure(1, 1);
    const gpus = collector('required').make();
    expect(await gpus.collect(Buffer.from(VECTOR_NONCE, 'hex'))).toHaveLength(1);
    // One measurement byte changed, the nonce kept: NVML still says confidential computing is on.
    const tampered = realReport();
    tampered.writeUInt8(tampered.readUInt8(tampered.length - 200) ^ 0xff, tampered.length - 200);
    configure(1, 1, tampered);
    await expect(gpus.collect(Buffer.from(VECTOR_NONCE, 'hex'))).rejects.toThrow(GpuAttestationUnavailable);
    await expect(gpus.collect(Buffer.from(VECTOR_NONCE, 'hex'))).rejects.toThrow(
      /^attestation.gpu is required but the GPU evidence NVML returned does not verify \(.*gpu\[0\]\.signature: the report's signature does not verify with the device certificate's key/,
    );
    gpus.close();
  });

  it('required refuses to start when confidential computing is off, or NVML is missing', () => {
    configure(2, 0);
    expect(() => collector('required').make()).toThrow(GpuAttestationUnavailable);
    expect(() => collector('required').make()).toThrow(
      'attestation.gpu is required but the GPUs are not in confidential-computing mode (NVML ccFeature off); set attestation.gpu to auto or off to serve without GPU evidence',
    );
    expect(() => collector('required', '/nonexistent/libnvidia-ml.so.1').make()).toThrow(
      /^attestation.gpu is required but NVML \(\/nonexistent\/libnvidia-ml.so.1\) cannot be loaded: .*; set attestation.gpu to auto or off/,
    );
    configure(0, 1);
    expect(() => collector('required').make()).toThrow('attestation.gpu is required but NVML lists no GPU');
  });

  it('auto carries no GPU evidence without NVML (info) or without confidential computing (warning); off never looks', async () => {
    const missing = collector('auto', '/nonexistent/libnvidia-ml.so.1');
    const none = missing.make();
    expect(none.gpus).toBe(0);
    expect(await none.collect(Buffer.alloc(32))).toEqual([]);
    expect(missing.logged).toHaveLength(1);
    expect(missing.logged[0]).toMatch(
      /^info: attestation.gpu auto: no NVIDIA driver here \(the NVML library \/nonexistent\/libnvidia-ml.so.1 is not installed\); documents carry no GPU evidence$/,
    );
    configure(2, 0);
    const off = collector('auto');
    expect(off.make().gpus).toBe(0);
    expect(off.logged).toEqual([
      'warn: attestation.gpu auto: the GPUs are not in confidential-computing mode (NVML ccFeature off); documents carry no GPU evidence',
    ]);
    const never = collector('off', '/nonexistent/libnvidia-ml.so.1');
    expect(never.make().gpus).toBe(0);
    expect(never.logged).toEqual([]);
  });
});
