import { fail, notPinned, pass } from '../check.ts';
import type { Check } from '../check.ts';
import type { SnpMinTcb, SnpReferenceValues } from '../reference/reference-values.ts';
import { toHex } from './byte-reader.ts';
import type { AmdCertificateTcb } from './amd-vcek-extensions.ts';
import type { SnpReport } from './snp-report.ts';

/** CPUID family of Turin (Zen 5), whose TCB_VERSION adds an FMC field and moves the others. */
const FAMILY_TURIN = 0x1a;
const TCB_PARTS = ['bootloader', 'tee', 'snp', 'microcode', 'fmc'] as const;
type TcbPart = (typeof TCB_PARTS)[number];
type TcbValues = Partial<Record<TcbPart, number>>;

/** A TCB_VERSION's security patch levels, laid out for the report's CPU family (the family is in report v3+). */
export function tcbParts(raw: bigint, cpuFamily: number | undefined): TcbValues {
  const b = (i: number) => Number((raw >> BigInt(8 * i)) & 0xffn);
  if (cpuFamily === FAMILY_TURIN) return { fmc: b(0), bootloader: b(1), tee: b(2), snp: b(3), microcode: b(7) };
  return { bootloader: b(0), tee: b(1), snp: b(6), microcode: b(7) };
}

/** CPUID_FAM_ID (report offset 0x188, versions 3 and later); undefined for version 2. */
export function reportCpuFamily(reportBytes: Uint8Array, version: number): number | undefined {
  return version >= 3 && reportBytes.length > 0x188 ? reportBytes[0x188] : undefined;
}

function tcbText(t: TcbValues): string {
  return TCB_PARTS.filter((p) => t[p] !== undefined)
    .map((p) => `${p} ${t[p]}`)
    .join(', ');
}

function floorCheck(name: string, which: string, why: string, tcb: TcbValues, floor: SnpMinTcb | undefined): Check {
  if (floor === undefined)
    return notPinned(name, `${which} is ${tcbText(tcb)}; no minimum TCB (snp.min_tcb) was given, so old, possibly vulnerable firmware would pass`);
  const low: string[] = [];
  for (const part of TCB_PARTS) {
    const min = floor[part];
    if (min === undefined) continue;
    const have = tcb[part];
    if (have === undefined) low.push(`${part} is not part of this CPU's TCB but a floor of ${min} is set`);
    else if (have < min) low.push(`${part} ${have} < ${min}`);
  }
  const floorText = TCB_PARTS.filter((p) => floor[p] !== undefined)
    .map((p) => `${p} ${floor[p]}`)
    .join(', ');
  return low.length === 0
    ? pass(name, `${which} ${tcbText(tcb)} is at or above the floor (${floorText}): ${why}`)
    : fail(name, `${which} ${tcbText(tcb)} is below the floor (${floorText}): ${low.join('; ')}; firmware this old lacks fixes the auditor requires`);
}

function flagCheck(name: string, value: boolean, accepted: readonly boolean[], onText: string, offText: string): Check {
  const text = value ? onText : offText;
  return accepted.includes(value) ? pass(name, text) : fail(name, `${text}; accepted: ${accepted.map((b) => (b ? 'set' : 'clear')).join(' or ')}`);
}

/**
 * SEV-SNP platform policy (docs/auditing.md#4-what-each-check-means-and-what-it-stops): DEBUG and MIGRATE_MA clear, SMT and VMPL as pinned, reported and launch TCB
 * at or above the floor, and the signing certificate's TCB extensions and hwID equal to the report's REPORTED_TCB
 * and CHIP_ID. `signer` is the VCEK/VLEK's extensions, or undefined when no certificate could be read.
 */
export function snpPlatformChecks(
  report: SnpReport,
  cpuFamily: number | undefined,
  signer: AmdCertificateTcb | undefined,
  ref: SnpReferenceValues | undefined,
): Check[] {
  const p = report.policy;
  const policyHex = `guest policy 0x${p.raw.toString(16)}`;
  const checks: Check[] = [
    p.debug
      ? fail('snp.debug', `${policyHex} has DEBUG set: the host can read and change the guest's memory, so nothing in it is confidential`)
      : pass('snp.debug', `${policyHex} has DEBUG clear: the host cannot debug the guest or read its memory`),
    flagCheck(
      'snp.migrate_ma',
      p.migrateMa,
      ref?.policy?.migrate_ma ?? [false],
      'MIGRATE_MA is set: a migration agent may move the guest, memory and keys, to another machine',
      'MIGRATE_MA is clear: no migration agent can take the guest and its keys elsewhere',
    ),
  ];
  const smt = `SMT is ${p.smtAllowed ? 'allowed: a sibling hardware thread of the guest may run host code (side channels)' : "not allowed: no other code shares the guest's cores"}`;
  checks.push(ref?.policy?.smt === undefined ? notPinned('snp.smt', smt) : flagCheck('snp.smt', p.smtAllowed, ref.policy.smt, smt, smt));
  const vmpl = `the report was requested at VMPL ${report.vmpl} (0 is the most privileged level, where an SVSM or the guest kernel runs)`;
  checks.push(
    ref?.vmpl === undefined
      ? notPinned('snp.vmpl', vmpl)
      : ref.vmpl.includes(report.vmpl)
        ? pass('snp.vmpl', vmpl)
        : fail('snp.vmpl', `${vmpl}; accepted: ${ref.vmpl.join(', ')}: a less privileged component than expected asked for it`),
  );

  const reported = tcbParts(report.reportedTcb.raw, cpuFamily);
  checks.push(
    floorCheck('snp.reported_tcb', 'REPORTED_TCB', 'it is the TCB whose key signed this report', reported, ref?.min_tcb),
    floorCheck('snp.launch_tcb', 'LAUNCH_TCB', 'it is the TCB the guest was started under', tcbParts(report.launchTcb.raw, cpuFamily), ref?.min_tcb),
  );
  checks.push(...signerChecks(report, reported, signer));
  return checks;
}

function signerChecks(report: SnpReport, reported: TcbValues, signer: AmdCertificateTcb | undefined): Check[] {
  const keyName = report.signingKey === 'vlek' ? 'VLEK' : 'VCEK';
  if (signer === undefined) {
    return [
      fail('snp.vcek_tcb', `not checked: no ${keyName} certificate to compare with REPORTED_TCB`),
      fail('snp.vcek_hwid', `not checked: no ${keyName} certificate to compare with CHIP_ID`),
    ];
  }
  const diffs: string[] = [];
  for (const part of TCB_PARTS) {
    if (reported[part] === undefined) continue;
    if (signer[part] !== reported[part]) diffs.push(`${part}: certificate ${signer[part] ?? 'absent'}, report ${reported[part]}`);
  }
  const checks: Check[] = [
    diffs.length === 0
      ? pass(
          'snp.vcek_tcb',
          `the ${keyName} certificate's TCB extensions (${tcbText(reported)}) equal the report's REPORTED_TCB: the key belongs to the firmware level the report claims`,
        )
      : fail(
          'snp.vcek_tcb',
          `the ${keyName} certificate's TCB extensions differ from REPORTED_TCB (${diffs.join('; ')}): the report is signed with a key of another firmware level`,
        ),
  ];
  if (report.signingKey === 'vlek') {
    checks.push(pass('snp.vcek_hwid', 'signed by a VLEK, which AMD issues per cloud provider rather than per chip: there is no hwID to compare with CHIP_ID'));
  } else if (signer.hwid === undefined) {
    checks.push(fail('snp.vcek_hwid', 'the VCEK certificate has no hwID extension to compare with CHIP_ID'));
  } else if (report.chipId.every((b) => b === 0)) {
    // go-sev-guest's validate does the same: a host may mask CHIP_ID (SNP_CONFIG MASK_CHIP_ID), which no report bit shows.
    checks.push(
      pass(
        'snp.vcek_hwid',
        `CHIP_ID is all zeros: the host masked it (MASK_CHIP_ID), so there is nothing to compare with the VCEK's hwID ${toHex(signer.hwid).slice(0, 16)}...; the VCEK's signature on the report (snp.report_signature) is what ties the report to the chip holding that key`,
      ),
    );
  } else {
    const chip = toHex(report.chipId);
    const hwid = toHex(signer.hwid);
    checks.push(
      chip === hwid
        ? pass('snp.vcek_hwid', `the VCEK's hwID equals the report's CHIP_ID ${chip.slice(0, 16)}...: the key is this chip's`)
        : fail('snp.vcek_hwid', `the VCEK's hwID ${hwid.slice(0, 16)}... is not the report's CHIP_ID ${chip.slice(0, 16)}...: the key belongs to another chip`),
    );
  }
  return checks;
}
