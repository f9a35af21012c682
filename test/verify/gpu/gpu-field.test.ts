import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { Check } from '../../../src/verify/check.ts';
import { readSpdmMeasurementReport, verifyGpuEvidence } from '../../../src/verify/gpu/index.ts';
import { gpuEntry, nvidiaVector, realChainPem, realReport, VECTOR_NONCE, VECTOR_TIME } from '../../support/gpu-fixtures.ts';

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
    const { checks } = verifyGpuEvidence([{ ...gpuEntry(ciReport(), ciChain(), CI_NONCE), index: 0 }], { nonce: CI_NONCE, at: new Date('2026-07-01T00:00:00Z') });
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
    expect(detail(checks, 'gpu[0].chain')).toBe('the chain holds 1 certificate (NVIDIA Device Identity CA), a CA and no device certificate: a GPU chain runs from the device certificate up to the root');
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

  it('is refused when two entries claim the same index', () => {
    const { checks } = verifyGpuEvidence([gpuEntry(), gpuEntry(ciReport(), ciChain(), CI_NONCE)], { nonce: VECTOR_NONCE, at: VECTOR_TIME });
    expect(marks(checks)[0]).toEqual(['gpu.evidence', false]);
    expect(detail(checks, 'gpu.evidence')).toBe('two GPU entries claim index 0: each GPU has its own index');
  });

  it('passes gpu.evidence for two distinct GPUs', () => {
    const { checks } = verifyGpuEvidence([gpuEntry(), { ...gpuEntry(ciReport(), ciChain(), CI_NONCE), index: 1 }], { nonce: VECTOR_NONCE, at: VECTOR_TIME });
    expect(marks(checks)[0]).toEqual(['gpu.evidence', true]);
    expect(detail(checks, 'gpu.evidence')).toBe('2 GPU reports, each with its own index and its own report');
  });
});
