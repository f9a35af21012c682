import { MeasureError } from './errors.ts';

/** CPUID Fn0000_0001_EAX (family, model, stepping) as AMD's CPUID specification packs it. */
export function cpuSignature(family: number, model: number, stepping: number): number {
  const familyLow = family > 0xf ? 0xf : family;
  const familyHigh = family > 0xf ? (family - 0xf) & 0xff : 0;
  return ((familyHigh << 20) | (((model >> 4) & 0xf) << 16) | (familyLow << 8) | ((model & 0xf) << 4) | (stepping & 0xf)) >>> 0;
}

const EPYC = cpuSignature(23, 1, 2);
const ROME = cpuSignature(23, 49, 0);
const MILAN = cpuSignature(25, 1, 1);
const GENOA = cpuSignature(25, 17, 0);

/** QEMU's AMD CPU models and the signature each puts in the VMSA's RDX. */
export const VCPU_SIGNATURES: Readonly<Record<string, number>> = {
  EPYC,
  'EPYC-v1': EPYC,
  'EPYC-v2': EPYC,
  'EPYC-IBPB': EPYC,
  'EPYC-v3': EPYC,
  'EPYC-v4': EPYC,
  'EPYC-Rome': ROME,
  'EPYC-Rome-v1': ROME,
  'EPYC-Rome-v2': ROME,
  'EPYC-Rome-v3': ROME,
  'EPYC-Milan': MILAN,
  'EPYC-Milan-v1': MILAN,
  'EPYC-Milan-v2': MILAN,
  'EPYC-Genoa': GENOA,
  'EPYC-Genoa-v1': GENOA,
  'EPYC-Turin': cpuSignature(26, 0, 0),
};

/** The signature of a named vCPU type, matched without regard to case. */
export function vcpuSignature(type: string): number {
  const name = Object.keys(VCPU_SIGNATURES).find((known) => known.toLowerCase() === type.toLowerCase());
  if (name === undefined)
    throw new MeasureError(
      'ERR_MEASURE_INPUT',
      `unknown vCPU type ${JSON.stringify(type)} (known: ${Object.keys(VCPU_SIGNATURES).join(', ')}); give --vcpu-sig or --vcpu-family/--vcpu-model/--vcpu-stepping instead`,
    );
  return VCPU_SIGNATURES[name]!;
}
