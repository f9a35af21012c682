import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { gpuEvidenceSha256 } from '../../../src/protocol/attestation.ts';
import type { Check } from '../../../src/verify/check.ts';
import {
  DEFAULT_GPU_TRUST_ROOTS,
  formatVbiosVersion,
  readSpdmMeasurementReport,
  verifyGpuEvidence,
  type GpuTrustRoots,
} from '../../../src/verify/gpu/index.ts';
import {
  createRimTestChain,
  gpuEntry,
  realChainPem,
  realReport,
  rimMatchingReport,
  rimText,
  signRim,
  VECTOR_NONCE,
  VECTOR_TIME,
  type RimTestChain,
} from '../../support/gpu-fixtures.ts';

const byName = (checks: Check[]): Record<string, boolean> => Object.fromEntries(checks.map((c) => [c.name, c.ok]));
const detail = (checks: Check[], name: string): string => checks.find((c) => c.name === name)?.detail ?? `no check ${name}`;

/** Offsets in the real report (37-byte request, then the response): found by reading it, asserted below. */
const RESPONSE = 37;
const RECORD = RESPONSE + 8;
const FIRST_BLOCK_VALUE = RECORD + 7;

function flipped(bytes: Uint8Array, offset: number): Buffer {
  const copy = Buffer.from(bytes);
  copy[offset] = copy[offset]! ^ 0x01;
  return copy;
}

describe('the SPDM report of a real H100 (nvtrust sample)', () => {
  it('reads the request, 64 measurement blocks, the opaque data and the signature', () => {
    const report = readSpdmMeasurementReport(realReport());
    expect(report.request).toEqual({ version: 0x11, param1: 0x01, param2: 0xff, nonce: Buffer.from(VECTOR_NONCE, 'hex'), slotId: 0 });
    expect(Buffer.from(report.response.nonce).toString('hex')).toBe('b4b8a06aaaa35542839388e159d447a5d6f6194998fd86513e2d591ccf640985');
    expect(report.blocks).toHaveLength(64);
    expect(report.blocks.every((b) => b.value.length === 48 && b.valueType === 1)).toBe(true);
    expect(Buffer.from(report.blocks[1]!.value).toString('hex').slice(0, 16)).toBe('8048dfd18fe229bf');
    expect(report.firmware).toMatchObject({ driverVersion: '550.90.07', vbiosVersion: '96.00.9F.00.01', project: '1010', projectSku: '0200', chipSku: '882' });
    expect(Buffer.from(report.firmware.fwid!).toString('hex')).toBe(
      'f5c384aebb579217a2c66b17ed0f28e6a9b8d639041acd7b4721cec004f7275494ba94bb5cdfdb3055ee051762b1f75d',
    );
    expect(report.opaque.map((f) => f.name)).toEqual([
      'vbios_version',
      'board_id',
      'chip_sku',
      'chip_sku_mod',
      'project',
      'project_sku',
      'project_sku_mod',
      'driver_version',
      'gpu_info',
      'msrscnt',
      'cprinfo',
      'nvdec0_status',
      'fwid',
      'protected_pcie_status',
    ]);
    expect(report.signedBytes.length).toBe(4117 - 96);
    expect(report.signature.length).toBe(96);
  });

  it('formats the VBIOS version as NVIDIA names its RIMs', () => {
    expect(formatVbiosVersion(Uint8Array.of(0x00, 0x9f, 0x00, 0x96, 0x01, 0, 0, 0))).toBe('96.00.9F.00.01');
    expect(formatVbiosVersion(Uint8Array.of(0x00, 0x5e, 0x00, 0x96, 0x01, 0, 0, 0))).toBe('96.00.5E.00.01');
  });

  it('refuses a truncated report, trailing bytes and another SPDM version, with stable codes', () => {
    const report = realReport();
    expect(() => readSpdmMeasurementReport(report.subarray(0, 4000))).toThrow(/ERR_SPDM_TRUNCATED|ends inside/);
    expect(() => readSpdmMeasurementReport(Buffer.concat([report, Buffer.of(1)]))).toThrow('1 byte(s) after the signature are not zero padding');
    const v12 = Buffer.from(report);
    v12[0] = 0x12;
    expect(() => readSpdmMeasurementReport(v12)).toThrow('SPDM version 1.2 is not supported');
    for (const bad of [report.subarray(0, 4000), v12]) {
      const { checks } = verifyGpuEvidence([gpuEntry(bad)], { nonce: VECTOR_NONCE, at: VECTOR_TIME });
      expect(checks.map((c) => [c.name, c.ok])).toEqual([['gpu[0].report', false]]);
    }
  });
});

describe('verifyGpuEvidence on the real report and chain', () => {
  it('passes the signature, chain, root, FWID and nonce checks; the sample RIMs are for other versions', () => {
    const rims = [rimText('driver-rim-test.swidtag'), rimText('vbios-rim-test.swidtag')];
    const { checks, gpus } = verifyGpuEvidence([gpuEntry()], { nonce: VECTOR_NONCE, rims, at: VECTOR_TIME });
    expect(byName(checks)).toEqual({
      'gpu.rim[0].signature': true,
      'gpu.rim[0].schema': true,
      'gpu.rim[0].chain': true,
      'gpu.rim[0].revocation': true,
      'gpu.rim[1].signature': true,
      'gpu.rim[1].schema': true,
      'gpu.rim[1].chain': true,
      'gpu.rim[1].revocation': true,
      'gpu[0].report': true,
      'gpu[0].certificates': true,
      'gpu[0].signature': true,
      'gpu[0].chain': true,
      'gpu[0].root': true,
      'gpu[0].fwid': true,
      'gpu[0].nonce': true,
      'gpu[0].driver_rim': false,
      'gpu[0].vbios_rim': false,
      'gpu[0].measurements': false,
      'gpu[0].revocation': true,
    });
    expect(detail(checks, 'gpu[0].chain')).toBe(
      'GH100 A01 GSP FMC LF <- GH100 A01 GSP BROM <- NVIDIA GH100 Provisioner ICA 1 <- NVIDIA GH100 Identity <- NVIDIA Device Identity CA: each certificate signed by the next and valid at 2024-06-01T00:00:00.000Z',
    );
    expect(detail(checks, 'gpu[0].driver_rim')).toBe('no verified RIM describes driver 550.90.07 (verified driver RIMs: 545.00)');
    expect(detail(checks, 'gpu[0].vbios_rim')).toBe('no verified RIM describes VBIOS 96.00.9F.00.01 (verified VBIOS RIMs: 96.00.5E.00.01)');
    expect(detail(checks, 'gpu[0].revocation')).toMatch(/^not checked: /);
    expect(gpus).toHaveLength(1);
    expect(gpus[0]).toMatchObject({ index: 0, arch: 'hopper', driverVersion: '550.90.07', vbiosVersion: '96.00.9F.00.01' });
    expect(gpus[0]!.measurements[1]!.slice(0, 16)).toBe('8048dfd18fe229bf');
  });

  it('fails the signature when one signature byte is flipped, and only the signature', () => {
    const { checks } = verifyGpuEvidence([gpuEntry(flipped(realReport(), 4117 - 10))], { nonce: VECTOR_NONCE, at: VECTOR_TIME });
    const failed = checks.filter((c) => !c.ok).map((c) => c.name);
    expect(failed).toEqual(['gpu[0].signature']);
    expect(checks.find((c) => c.name === 'gpu[0].measurements')).toEqual({
      name: 'gpu[0].measurements',
      ok: true,
      pinned: false,
      detail: 'no RIMs given (reference values gpu.rims): the measurements of driver 550.90.07 and VBIOS 96.00.9F.00.01 were compared with nothing',
    });
    expect(detail(checks, 'gpu[0].signature')).toContain('does not verify with the device certificate');
  });

  it('fails the signature when a measurement byte is changed', () => {
    const { checks } = verifyGpuEvidence([gpuEntry(flipped(realReport(), FIRST_BLOCK_VALUE + 55))], { nonce: VECTOR_NONCE, at: VECTOR_TIME });
    expect(byName(checks)['gpu[0].signature']).toBe(false);
    expect(byName(checks)['gpu[0].report']).toBe(true);
  });

  it('fails the nonce for another nonce, for none, and when the entry misstates it', () => {
    const other = 'aa'.repeat(32);
    let checks = verifyGpuEvidence([gpuEntry()], { nonce: other, at: VECTOR_TIME }).checks;
    expect(byName(checks)['gpu[0].nonce']).toBe(false);
    expect(detail(checks, 'gpu[0].nonce')).toBe(
      `the signed request carries nonce ${VECTOR_NONCE}, not yours (${other}): the report is replayed or made for someone else`,
    );
    checks = verifyGpuEvidence([gpuEntry()], { at: VECTOR_TIME }).checks;
    expect(byName(checks)['gpu[0].nonce']).toBe(false);
    expect(detail(checks, 'gpu[0].nonce')).toMatch(/^not checked: no expected nonce/);
    checks = verifyGpuEvidence([gpuEntry(realReport(), realChainPem(), other)], { nonce: other, at: VECTOR_TIME }).checks;
    expect(detail(checks, 'gpu[0].nonce')).toBe(`the entry says nonce ${other} but the signed request carries ${VECTOR_NONCE}`);
  });

  it('fails the root for a chain that ends elsewhere, and the chain when a link is missing', () => {
    const foreign: GpuTrustRoots = { deviceIdentity: DEFAULT_GPU_TRUST_ROOTS.rim, rim: DEFAULT_GPU_TRUST_ROOTS.rim };
    let checks = verifyGpuEvidence([gpuEntry()], { nonce: VECTOR_NONCE, roots: foreign, at: VECTOR_TIME }).checks;
    expect(byName(checks)['gpu[0].chain']).toBe(true);
    expect(byName(checks)['gpu[0].root']).toBe(false);
    expect(detail(checks, 'gpu[0].root')).toContain('not a trusted NVIDIA device root');
    const blocks = realChainPem().match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)!;
    checks = verifyGpuEvidence([gpuEntry(realReport(), [blocks[0], ...blocks.slice(2)].join('\n'))], { nonce: VECTOR_NONCE, at: VECTOR_TIME }).checks;
    expect(byName(checks)['gpu[0].chain']).toBe(false);
    expect(detail(checks, 'gpu[0].chain')).toBe(
      'the device certificate chain is broken: GH100 A01 GSP FMC LF names a different issuer than NVIDIA GH100 Provisioner ICA 1',
    );
    expect(byName(checks)['gpu[0].signature']).toBe(true);
  });

  it('fails the FWID when the report states another one', () => {
    const report = realReport();
    const fwidAt = report.indexOf(Buffer.from('f5c384aebb579217', 'hex'));
    expect(fwidAt).toBeGreaterThan(0);
    const { checks } = verifyGpuEvidence([gpuEntry(flipped(report, fwidAt))], { nonce: VECTOR_NONCE, at: VECTOR_TIME });
    expect(byName(checks)['gpu[0].fwid']).toBe(false);
    expect(detail(checks, 'gpu[0].fwid')).toBe(
      "the report's FWID f4c384aebb579217... differs from the device certificate's f5c384aebb579217...: the answering firmware is not the certified one",
    );
  });

  it('checks the binding list against each report and says when there is no GPU evidence', () => {
    const entry = gpuEntry();
    expect(gpuEvidenceSha256(entry)).toBe(createHash('sha256').update(realReport()).digest('hex'));
    expect(byName(verifyGpuEvidence([entry], { boundSha256: [gpuEvidenceSha256(entry)], nonce: VECTOR_NONCE, at: VECTOR_TIME }).checks)['gpu.binding']).toBe(
      true,
    );
    expect(byName(verifyGpuEvidence([entry], { boundSha256: ['00'.repeat(32)], nonce: VECTOR_NONCE, at: VECTOR_TIME }).checks)['gpu.binding']).toBe(false);
    expect(verifyGpuEvidence([{ index: 0, arch: 'hopper' } as never], {}).checks).toEqual([
      { name: 'gpu[0].report', ok: false, detail: 'the GPU evidence entry lacks an integer index or a string arch, report, certificates or nonce' },
    ]);
    expect(verifyGpuEvidence([], {}).checks).toEqual([
      { name: 'gpu.evidence', ok: true, detail: 'the evidence holds no GPU report: it says nothing about any GPU the model may run on' },
    ]);
    expect(verifyGpuEvidence([], { rims: [rimText('driver-rim-test.swidtag')] }).checks.map((c) => [c.name, c.ok])).toEqual([['gpu.evidence', false]]);
  });
});

describe('measurements against RIMs that describe the real report (signed by a test RIM root)', () => {
  let chain: RimTestChain;
  let roots: GpuTrustRoots;
  beforeAll(async () => {
    chain = await createRimTestChain();
    roots = { deviceIdentity: DEFAULT_GPU_TRUST_ROOTS.deviceIdentity, rim: [chain.rootPem] };
  });

  const matching = (change?: (index: number, value: string) => string): string[] => [
    signRim(rimMatchingReport(rimText('driver-rim-test.swidtag'), '550.90.07', change), chain),
    signRim(rimMatchingReport(rimText('vbios-rim-test.swidtag'), '96.00.9F.00.01'), chain),
  ];

  it('passes every check when both RIMs match', () => {
    const { checks } = verifyGpuEvidence([gpuEntry()], { nonce: VECTOR_NONCE, rims: matching(), roots, at: VECTOR_TIME });
    expect(checks.filter((c) => !c.ok)).toEqual([]);
    expect(detail(checks, 'gpu[0].driver_rim')).toBe('the driver RIM 550.90.07 (GH100), signed by Test RIM Signer, describes the driver this GPU runs');
    expect(detail(checks, 'gpu[0].measurements')).toBe(
      'all 33 measurements the RIMs pin equal one of their signed values: the GPU runs the driver and VBIOS NVIDIA published',
    );
  });

  it('fails the measurements at the index a RIM pins differently', () => {
    const rims = matching((i, v) => (i === 33 ? `${v.slice(0, -2)}00` : v));
    const { checks } = verifyGpuEvidence([gpuEntry()], { nonce: VECTOR_NONCE, rims, roots, at: VECTOR_TIME });
    expect(checks.filter((c) => !c.ok).map((c) => c.name)).toEqual(['gpu[0].measurements']);
    expect(detail(checks, 'gpu[0].measurements')).toMatch(
      /^1 of 33 measurements differ from every value the RIMs allow, at indexes 33; first: 33 \(driver RIM 550\.90\.07 \(GH100\): 198b81d9c0ce\.\.\.\)/,
    );
  });

  it('fails the measurements when the two RIMs pin the same index', () => {
    const vbiosAlsoPins7 = rimMatchingReport(rimText('vbios-rim-test.swidtag'), '96.00.9F.00.01').replace(
      /<ns0:Resource type="Measurement" index="7" active="False"/,
      '<ns0:Resource type="Measurement" index="7" active="True"',
    );
    const rims = [matching()[0]!, signRim(vbiosAlsoPins7, chain)];
    const { checks } = verifyGpuEvidence([gpuEntry()], { nonce: VECTOR_NONCE, rims, roots, at: VECTOR_TIME });
    expect(detail(checks, 'gpu[0].measurements')).toBe('the RIMs both pin measurement indexes 7, so they contradict each other');
  });

  it('does not use a RIM whose chain ends at a root it was not told to trust', () => {
    const { checks } = verifyGpuEvidence([gpuEntry()], { nonce: VECTOR_NONCE, rims: matching(), at: VECTOR_TIME });
    expect(byName(checks)['gpu.rim[0].signature']).toBe(true);
    expect(byName(checks)['gpu.rim[0].chain']).toBe(false);
    expect(detail(checks, 'gpu.rim[0].chain')).toContain('Test CoRIM signing Root CA, which is not a trusted RIM root');
    expect(detail(checks, 'gpu[0].driver_rim')).toBe('no verified RIM describes driver 550.90.07 (verified driver RIMs: none)');
  });
});
