import type { GpuEvidence } from '../protocol/attestation.ts';
import { fail, type Check } from '../verify/check.ts';
import { describeGpuEvidenceError } from '../verify/gpu/errors.ts';
import { readOcspBundle } from '../verify/gpu/ocsp.ts';
import { readSpdmMeasurementReport, verifyGpuEvidence, type GpuTrustRoots, type SpdmMeasurementReport } from '../verify/gpu/index.ts';
import { decodeEvidenceText } from '../verify/evidence/evidence-text.ts';
import type { EvidenceExtension } from './evidence-extension.ts';
import { readNvidiaCollateralBundle, type NvidiaCollateralFiles } from '../verify/evidence/collateral/nvidia-collateral.ts';
import { UnreadableError } from './cli-errors.ts';
import { isSigilError } from '../protocol/sigil-error.ts';

/** An SPDM report as nvtrust writes it (hex text, 0x optional), as base64 text, or as raw bytes. */
export function gpuReportBytes(file: Buffer, path = 'GPU report'): Uint8Array {
  return decodeEvidenceText(new Uint8Array(file), path);
}

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');

/** What the report says about the GPU, for the auditor to read and compare (JSON `measured.gpu`). */
function measuredValues(report: SpdmMeasurementReport): Record<string, unknown> {
  const f = report.firmware;
  const measurements: Record<string, string> = {};
  for (const b of report.blocks) measurements[String(b.index - 1)] = hex(b.value);
  return {
    driver_version: f.driverVersion,
    vbios_version: f.vbiosVersion,
    project: f.project,
    project_sku: f.projectSku,
    chip_sku: f.chipSku,
    fwid: f.fwid === null ? null : hex(f.fwid),
    nonce: hex(report.request.nonce),
    measurements,
  };
}

/** The NVIDIA part of the --collateral bundle (nvidia-collateral.json and the files it names), if any. */
async function nvidiaBundle(dir: string | undefined): Promise<NvidiaCollateralFiles | undefined> {
  if (dir === undefined) return undefined;
  try {
    return await readNvidiaCollateralBundle(dir);
  } catch (err) {
    throw new UnreadableError(
      `cannot read the collateral bundle ${dir}: ${isSigilError(err) ? err.message : ((err as NodeJS.ErrnoException).code ?? (err as Error).message)}`,
    );
  }
}

/**
 * `sigil verify-evidence --gpu-report FILE --gpu-certs FILE [--nonce HEX]`: one NVIDIA GPU's SPDM report checked as
 * `sigil verify` checks a document's GPU evidence, with the RIMs of `--reference` (gpu.rims). `roots` replaces
 * NVIDIA's built-in roots (tests).
 */
export function gpuEvidenceExtension(roots?: GpuTrustRoots): EvidenceExtension {
  return {
    name: 'gpu',
    options: {
      'gpu-report': {
        type: 'string',
        value: 'FILE',
        description:
          "an NVIDIA GPU's SPDM GET_MEASUREMENTS request and signed response: hex text as nvtrust writes it, base64 text, or raw bytes (alone, or together with --tdx-quote or --snp-report)",
      },
      'gpu-certs': { type: 'string', value: 'FILE', description: "the GPU's device certificate chain (PEM, the device's own certificate first)" },
      nonce: {
        type: 'string',
        value: 'HEX',
        description: 'the 32-byte nonce the GPU report must answer (64 hex digits); without it, FAIL: nothing shows the report is fresh',
      },
    },
    notes: `GPU RIMs: the reference file's gpu.rims (NVIDIA's signed driver and VBIOS RIMs) and those of --collateral DIR;
without any the measurements are shown but not compared (----). OCSP answers: the reference file's
gpu.ocsp and those of --collateral DIR; without any, revocation is not checked (----).`,
    wants: (values) => values['gpu-report'] !== undefined || values['gpu-certs'] !== undefined || values.nonce !== undefined,
    usageProblem(values) {
      if (values['gpu-report'] === undefined) return '--gpu-certs and --nonce go with --gpu-report';
      if (values['gpu-certs'] === undefined) return '--gpu-report needs --gpu-certs (the GPU certificate chain, PEM)';
      const nonce = values.nonce;
      if (nonce !== undefined && (typeof nonce !== 'string' || !/^[0-9a-fA-F]{64}$/.test(nonce))) return '--nonce is 32 bytes of hex (64 digits)';
      return undefined;
    },
    async verify(values, ctx) {
      const reportPath = values['gpu-report'] as string;
      const file = await ctx.read(reportPath, 'GPU report');
      let bytes: Uint8Array;
      try {
        bytes = gpuReportBytes(file, reportPath);
      } catch (err) {
        return { checks: [fail('gpu[0].report', (err as Error).message)] };
      }
      const chain = (await ctx.read(values['gpu-certs'] as string, 'GPU certificate chain')).toString('latin1');
      const bundle = await nvidiaBundle(ctx.collateral);
      const rimPaths = ctx.reference?.gpu?.rims ?? [];
      const rims = [...(await Promise.all(rimPaths.map(async (path) => (await ctx.read(path, 'RIM')).toString('utf8')))), ...(bundle?.rims ?? [])];
      const ocspPaths = ctx.reference?.gpu?.ocsp;
      const named = await Promise.all((ocspPaths ?? []).map(async (path) => ({ label: path, der: new Uint8Array(await ctx.read(path, 'OCSP response')) })));
      const ocsp = ocspPaths === undefined && bundle === undefined ? undefined : readOcspBundle([...named, ...(bundle?.ocsp ?? [])]);
      let report: SpdmMeasurementReport;
      try {
        report = readSpdmMeasurementReport(bytes);
      } catch (err) {
        const checks: Check[] = [fail('gpu[0].report', `${reportPath} is not a readable SPDM 1.1 measurement report: ${describeGpuEvidenceError(err)}`)];
        return { checks };
      }
      // The entry states the nonce its own request carries; --nonce is what it is compared with.
      const entry: GpuEvidence = {
        index: 0,
        arch: 'unknown',
        report: Buffer.from(bytes).toString('base64'),
        certificates: Buffer.from(chain, 'latin1').toString('base64'),
        nonce: hex(report.request.nonce),
      };
      const options: Parameters<typeof verifyGpuEvidence>[1] = { at: ctx.at };
      if (typeof values.nonce === 'string') options.nonce = values.nonce.toLowerCase();
      if (rims.length > 0) options.rims = rims;
      if (ocsp !== undefined) options.ocsp = ocsp;
      if (ctx.reference?.gpu?.ocsp_allow_missing !== undefined) options.ocspAllowMissing = ctx.reference.gpu.ocsp_allow_missing;
      if (roots !== undefined) options.roots = roots;
      return { checks: verifyGpuEvidence([entry], options).checks, measured: measuredValues(report) };
    },
  };
}

export const GPU_EVIDENCE: EvidenceExtension = gpuEvidenceExtension();
