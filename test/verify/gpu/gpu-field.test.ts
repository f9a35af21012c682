import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { checkMark, type Check } from '../../../src/verify/check.ts';
import { DEFAULT_GPU_TRUST_ROOTS, readSpdmMeasurementReport, verifyGpuEvidence, type GpuTrustRoots } from '../../../src/verify/gpu/index.ts';
import {
  createRimTestChain,
  gpuEntry,
  nvidiaVector,
  realChainPem,
  realReport,
  rimMatchingReport,
  rimText,
  signRim,
  VECTOR_NONCE,
  VECTOR_TIME,
  type RimTestChain,
} from '../../support/gpu-fixtures.ts';

const marks = (checks: Check[]): Array<[string, boolean]> => checks.map((c) => [c.name, c.ok]);
const detail = (checks: Check[], name: string): string => checks.find((c) => c.name === name)?.detail ?? `no check ${name}`;

// An H100 report recorded in a CI run (trustee's test data): one zero byte follows the SPDM signature.
const ciReport = (): Buffer => Buffer.from(readFileSync(new URL('../../vectors/nvidia/trustee-hopper-report.hex', import.meta.url), 'latin1').trim(), 'hex');
const ciChain = (): string => readFileSync(new URL('../../vectors/nvidia/trustee-hopper-cert-chain.pem', import.meta.url), 'latin1');
const CI_NONCE = '87d8e24ab336adafe228d49e83d745f6dba4ae505372b6a5704820856b343fec';

describe('a real H100 report with a zero byte after its signature', () => {
  it('is read; the unsigned zero padding is named and ignored, and every device check passes', () => {
    const report = readSpdmMeasurementReport(ciReport());
    expect(report.trailingZeroBytes).toBe(1);
    const { checks } = verifyGpuEvidence([{ ...gpuEntry(ciReport(), ciChain(), CI_NONCE), index: 0 }], {
      nonce: CI_NONCE,
      at: new Date('2026-07-01T00:00:00Z'),
    });
    expect(marks(checks).filter(([, ok]) => !ok)).toEqual([]);
    expect(detail(checks, 'gpu[0].report')).toMatch(/; 1 zero byte after the signature \(padding nobody signed\) ignored$/);
  });

  it('refuses a byte after the signature that is not zero: data nobody signed', () => {
    const bytes = Buffer.concat([ciReport().subarray(0, -1), Buffer.of(0x41)]);
    expect(() => readSpdmMeasurementReport(bytes)).toThrow('1 byte(s) after the signature are not zero padding: data nobody signed follows the report');
  });
});

describe('the shape of a GPU device certificate chain', () => {
  it("fails chain and root for a 'chain' holding only NVIDIA's root", () => {
    const root = nvidiaVector('nvidia-device-identity-root.pem').toString('latin1');
    const { checks } = verifyGpuEvidence([gpuEntry(realReport(), root)], { nonce: VECTOR_NONCE, at: VECTOR_TIME });
    expect(marks(checks).filter(([n]) => ['gpu[0].signature', 'gpu[0].chain', 'gpu[0].root'].includes(n))).toEqual([
      ['gpu[0].signature', false],
      ['gpu[0].chain', false],
      ['gpu[0].root', false],
    ]);
    expect(detail(checks, 'gpu[0].chain')).toBe(
      'the chain holds 1 certificate (NVIDIA Device Identity CA), a CA and no device certificate: a GPU chain runs from the device certificate up to the root',
    );
    expect(detail(checks, 'gpu[0].root')).toBe('not checked: the chain has no device certificate');
  });

  it('fails the chain when the device certificate is left out and the chain starts at a CA', () => {
    const pems = realChainPem().match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)!;
    const { checks } = verifyGpuEvidence([gpuEntry(realReport(), pems.slice(2).join('\n'))], { nonce: VECTOR_NONCE, at: VECTOR_TIME });
    expect(marks(checks).find(([n]) => n === 'gpu[0].chain')).toEqual(['gpu[0].chain', false]);
    expect(detail(checks, 'gpu[0].chain')).toMatch(/^the first certificate \(.+\) is a CA, not a device certificate/);
  });
});

describe('a GPU listed more than once', () => {
  it('is refused when the same report appears twice, even under two indexes', () => {
    const { checks } = verifyGpuEvidence([gpuEntry(), { ...gpuEntry(), index: 1 }], { nonce: VECTOR_NONCE, at: VECTOR_TIME });
    expect(marks(checks)[0]).toEqual(['gpu.evidence', false]);
    expect(detail(checks, 'gpu.evidence')).toBe('GPU entries 0 and 1 carry the same report: one GPU would be counted twice');
  });

  it('is refused when a copy differs only in zero padding after the signature or in its base64 spelling', () => {
    const padded = Buffer.concat([Buffer.from(realReport()), Buffer.alloc(1)]);
    const unpadded = gpuEntry();
    const spaced = { ...gpuEntry(), index: 2, report: unpadded.report.replace(/(.{64})/g, '$1\n') };
    const { checks } = verifyGpuEvidence([unpadded, { ...gpuEntry(padded), index: 1 }, spaced], { nonce: VECTOR_NONCE, at: VECTOR_TIME });
    expect(marks(checks)[0]).toEqual(['gpu.evidence', false]);
    expect(detail(checks, 'gpu.evidence')).toBe('GPU entries 0 and 1 carry the same report: one GPU would be counted twice');
  });

  it('is refused when two entries claim the same index', () => {
    const { checks } = verifyGpuEvidence([gpuEntry(), gpuEntry(ciReport(), ciChain(), CI_NONCE)], { nonce: VECTOR_NONCE, at: VECTOR_TIME });
    expect(marks(checks)[0]).toEqual(['gpu.evidence', false]);
    expect(detail(checks, 'gpu.evidence')).toBe('two GPU entries claim index 0: each GPU has its own index');
  });

  it('passes gpu.evidence for two distinct GPUs', () => {
    const { checks } = verifyGpuEvidence([gpuEntry(), { ...gpuEntry(ciReport(), ciChain(), CI_NONCE), index: 1 }], { nonce: VECTOR_NONCE, at: VECTOR_TIME });
    expect(marks(checks)[0]).toEqual(['gpu.evidence', true]);
    expect(detail(checks, 'gpu.evidence')).toBe('2 GPU reports from 2 GPUs: each entry has its own index, its own report and its own GPU identity certificate');
  });

  it('counts two fresh reports from one GPU as one GPU: by its identity certificate, not by the report bytes', () => {
    // A second report of the same H100: the same chain, another requester nonce (derived from the real report, so
    // its signature no longer verifies; gpu.evidence judges the GPUs, the entry's own checks its signature).
    const fresh = Buffer.from(realReport());
    Buffer.from('ab'.repeat(32), 'hex').copy(fresh, 4);
    const { checks } = verifyGpuEvidence([gpuEntry(), { ...gpuEntry(fresh, realChainPem(), 'ab'.repeat(32)), index: 1 }], {
      nonce: VECTOR_NONCE,
      at: VECTOR_TIME,
    });
    expect(marks(checks)[0]).toEqual(['gpu.evidence', false]);
    expect(detail(checks, 'gpu.evidence')).toBe(
      'GPU entries 0 and 1 come from one GPU: both chains carry its identity certificate (GH100 A01 GSP BROM serial 41431D480FE5E87274, issued by NVIDIA for one chip), so two reports of one GPU would count it twice',
    );
  });

  it('knows the GPU however its chain is spelled: the same certificates in another PEM layout are the same GPU', () => {
    const fresh = Buffer.from(realReport());
    Buffer.from('cd'.repeat(32), 'hex').copy(fresh, 4);
    const respelled = realChainPem().replace(/\n/g, '\r\n');
    const { checks } = verifyGpuEvidence([gpuEntry(), { ...gpuEntry(fresh, respelled, 'cd'.repeat(32)), index: 1 }], { nonce: VECTOR_NONCE, at: VECTOR_TIME });
    expect(marks(checks)[0]).toEqual(['gpu.evidence', false]);
    expect(detail(checks, 'gpu.evidence')).toMatch(/^GPU entries 0 and 1 come from one GPU: /);
  });
});

describe('the VBIOS RIM is chosen by board and SKU as well as version', () => {
  let chain: RimTestChain;
  let roots: GpuTrustRoots;
  beforeAll(async () => {
    chain = await createRimTestChain();
    roots = { deviceIdentity: DEFAULT_GPU_TRUST_ROOTS.deviceIdentity, rim: [chain.rootPem] };
  });
  const driver = () => signRim(rimMatchingReport(rimText('driver-rim-test.swidtag'), '550.90.07'), chain);
  const vbiosXml = () => signRim(rimMatchingReport(rimText('vbios-rim-test.swidtag'), '96.00.9F.00.01'), chain);
  /** As NVIDIA's RIM service answers GET /v1/rim/<id>: the id, the SWID tag in base64 and its SHA-256. */
  const fromRimService = (id: string, xml: string, sha256 = createHash('sha256').update(xml).digest('hex')) =>
    JSON.stringify({ id, rim: Buffer.from(xml).toString('base64'), sha256, rim_format: 'SWID' });
  const run = (vbios: string) => verifyGpuEvidence([gpuEntry()], { nonce: VECTOR_NONCE, rims: [driver(), vbios], roots, at: VECTOR_TIME }).checks;

  it("passes with the RIM service's VBIOS RIM for this board (project 1010, SKU 0200, chip 882)", () => {
    const checks = run(fromRimService('NV_GPU_VBIOS_1010_0200_882_96009F0001', vbiosXml()));
    expect(checks.filter((c) => !c.ok)).toEqual([]);
    expect(detail(checks, 'gpu[0].vbios_board')).toBe(
      'the VBIOS RIM NV_GPU_VBIOS_1010_0200_882_96009F0001 is for project 1010, project SKU 0200, chip SKU 882: this board',
    );
  });

  it('does not choose a RIM of the same VBIOS version made for another board SKU', () => {
    const checks = run(fromRimService('NV_GPU_VBIOS_1010_0201_882_96009F0001', vbiosXml()));
    expect(
      marks(checks)
        .filter(([, ok]) => !ok)
        .map(([n]) => n),
    ).toEqual(['gpu[0].vbios_rim', 'gpu[0].measurements']);
    expect(detail(checks, 'gpu[0].vbios_rim')).toBe(
      'no verified RIM describes VBIOS 96.00.9F.00.01 on project 1010, project SKU 0200, chip SKU 882 (RIMs of that version for other boards: NV_GPU_VBIOS_1010_0201_882_96009F0001)',
    );
  });

  it('says the board was not checked when the RIM is bare SWID XML, which names none', () => {
    const checks = run(vbiosXml());
    const board = checks.find((c) => c.name === 'gpu[0].vbios_board')!;
    expect(checkMark(board)).toBe('----');
    expect(board.detail).toBe(
      "the VBIOS RIM was given as bare SWID XML, which names no board: the board and SKU it was made for were not compared (give the RIM service's answer, NV_GPU_VBIOS_<project>_<SKU>_<chip>_<version>)",
    );
  });

  it("refuses a RIM service answer whose SHA-256 is not its RIM's, or whose id names another version", () => {
    const badHash = run(fromRimService('NV_GPU_VBIOS_1010_0200_882_96009F0001', vbiosXml(), '00'.repeat(32)));
    expect(detail(badHash, 'gpu.rim[1].signature')).toBe(
      "the RIM cannot be read: ERR_RIM_MALFORMED: the RIM service answer's sha256 0000000000000000... is not the SHA-256 of its RIM",
    );
    const otherVersion = run(fromRimService('NV_GPU_VBIOS_1010_0200_882_96005E0001', vbiosXml()));
    expect(detail(otherVersion, 'gpu.rim[1].signature')).toBe(
      'the signed RIM cannot be read: ERR_RIM_MALFORMED: the RIM service id NV_GPU_VBIOS_1010_0200_882_96005E0001 names VBIOS 96005E0001, but the RIM describes 96.00.9F.00.01',
    );
  });
});
