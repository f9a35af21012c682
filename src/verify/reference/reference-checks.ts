import { fail, notPinned, pass } from '../check.ts';
import type { Check } from '../check.ts';
import type { ReferenceValues } from './reference-values.ts';

/** A measured value, what it measures (for people), and the accepted values if pinned. */
export interface Measured {
  /** Check name, e.g. `reference.rtmr1`. */
  name: string;
  /** The field as the vendor names it, e.g. `RTMR1`. */
  label: string;
  /** What the register or field covers, in words, e.g. "the kernel and boot loader". */
  covers: string;
  /** Lowercase hex. */
  value: string;
  accepted: string[] | undefined;
}

function short(hex: string): string {
  return hex.length > 24 ? `${hex.slice(0, 16)}...${hex.slice(-8)}` : hex;
}

/** One pinned value compared with its accepted list, or a "not pinned" line saying what was left unchecked. */
export function compareMeasured(m: Measured): Check {
  if (m.accepted === undefined) {
    return notPinned(m.name, `${m.label} ${m.value} (${m.covers}) was compared with nothing: no reference value pins it`);
  }
  const hit = m.accepted.indexOf(m.value);
  if (hit !== -1) {
    return pass(
      m.name,
      `${m.label} ${short(m.value)} equals accepted reference value ${hit + 1} of ${m.accepted.length}: ${m.covers} is what the auditor expects`,
    );
  }
  return fail(
    m.name,
    `${m.label} ${m.value} is none of the ${m.accepted.length} accepted reference value(s) (${m.accepted.map(short).join(', ')}): ${m.covers} is not what the auditor expects`,
  );
}

/** What each TDX register measures (Intel TDX module spec, TDVF design guide, Linux boot). */
export const TDX_REGISTERS = {
  mrtd: { label: 'MRTD', covers: 'the TD firmware (TDVF/OVMF) loaded at build time' },
  rtmr0: { label: 'RTMR0', covers: 'the firmware configuration (TD HOB, ACPI tables, Secure Boot variables)' },
  rtmr1: { label: 'RTMR1', covers: 'the boot loader and kernel image started by the firmware' },
  rtmr2: { label: 'RTMR2', covers: 'the kernel command line and initrd' },
  rtmr3: { label: 'RTMR3', covers: 'the runtime events of the guest (the application, e.g. Sigil measuring itself)' },
} as const;

export type TdxRegister = keyof typeof TDX_REGISTERS;

/** The TDX launch measurements as lowercase hex. */
export interface TdxMeasurements {
  mrtd: string;
  rtmr0: string;
  rtmr1: string;
  rtmr2: string;
  rtmr3: string;
}

export interface SnpMeasurements {
  measurement: string;
  host_data: string;
}

export const SNP_FIELDS = {
  measurement: {
    label: 'MEASUREMENT',
    covers: 'the initial guest memory and vCPU state: the firmware and, with direct boot, the kernel, initrd and command line hashes',
  },
  host_data: { label: 'HOST_DATA', covers: 'the 32 bytes the host fixed at launch (e.g. a hash of the configuration)' },
} as const;

/**
 * The verdict line about reference values as a whole: without any file the code was not compared with anything,
 * which the report must say in so many words; a file that pins nothing for this TEE is a mismatch and fails.
 */
export function referenceFileCheck(ref: ReferenceValues | undefined, tee: 'tdx' | 'sev-snp'): Check {
  const section = tee === 'tdx' ? ref?.tdx : ref?.snp;
  const teeName = tee === 'tdx' ? 'TDX' : 'SEV-SNP';
  if (ref === undefined) {
    return notPinned(
      'reference.values',
      'no reference values given (--reference FILE): the code was not compared with reference values, so this proves genuine hardware but not which software runs on it',
    );
  }
  if (section === undefined) {
    const other = tee === 'tdx' ? ref.snp : ref.tdx;
    if (other !== undefined) {
      return fail(
        'reference.values',
        `the reference values pin ${tee === 'tdx' ? 'SEV-SNP' : 'TDX'} values but nothing for ${teeName}, the TEE of this evidence: the auditor expected a different platform`,
      );
    }
    return notPinned(
      'reference.values',
      `the reference values pin nothing for ${teeName} (only GPU values): the code of this confidential VM was not compared with reference values`,
    );
  }
  return pass('reference.values', `reference values for ${teeName} given: each pinned value below is compared, each unpinned one is listed as not pinned`);
}

/**
 * A service without a hardware enclave reports no launch measurement, so launch values the reference (or a
 * release) pins were compared with nothing: a failure that says so (waived with the no-TEE waiver), never silence.
 */
export function launchValuesNotCompared(ref: ReferenceValues | undefined): Check | undefined {
  const pinned = [
    ...(ref?.snp === undefined ? [] : [`SEV-SNP (${describePinned(ref.snp, SNP_FIELDS)})`]),
    ...(ref?.tdx === undefined ? [] : [`TDX (${describePinned(ref.tdx, TDX_REGISTERS)})`]),
  ];
  if (pinned.length === 0) return undefined;
  return fail(
    'reference.values',
    `the reference values pin launch measurements for ${pinned.join(' and ')}, but this service runs in no hardware enclave and reports no launch measurement: none of them was compared with what runs`,
  );
}

function describePinned(section: object, fields: Record<string, { label: string }>): string {
  const named = Object.entries(fields)
    .map(([key, { label }]) => [label, (section as Record<string, unknown>)[key]] as const)
    .filter((entry): entry is readonly [string, unknown[]] => Array.isArray(entry[1]))
    .map(([label, values]) => `${label}: ${values.length} value${values.length === 1 ? '' : 's'}`);
  return named.length === 0 ? 'platform values only' : named.join(', ');
}

export function tdxReferenceChecks(measured: TdxMeasurements, ref: ReferenceValues | undefined): Check[] {
  const pinned = ref?.tdx;
  const checks = [referenceFileCheck(ref, 'tdx')];
  for (const key of Object.keys(TDX_REGISTERS) as TdxRegister[]) {
    checks.push(compareMeasured({ name: `reference.${key}`, ...TDX_REGISTERS[key], value: measured[key], accepted: pinned?.[key] }));
  }
  return checks;
}

export function snpReferenceChecks(measured: SnpMeasurements, ref: ReferenceValues | undefined): Check[] {
  const pinned = ref?.snp;
  const checks = [referenceFileCheck(ref, 'sev-snp')];
  for (const key of ['measurement', 'host_data'] as const) {
    checks.push(compareMeasured({ name: `reference.${key}`, ...SNP_FIELDS[key], value: measured[key], accepted: pinned?.[key] }));
  }
  return checks;
}
