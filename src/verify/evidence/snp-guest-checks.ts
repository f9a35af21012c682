import type { X509Certificate } from 'node:crypto';
import { fail, notPinned, pass } from '../check.ts';
import type { Check } from '../check.ts';
import type { SnpReferenceValues } from '../reference/reference-values.ts';
import { toHex } from './byte-reader.ts';
import { commonName } from './certificate-chain.ts';
import { SNP_PLATFORM_INFO_BITS, SNP_POLICY_BITS } from './snp-bits.ts';
import type { SnpReport } from './snp-report.ts';

const isSet = (raw: bigint, bit: bigint): boolean => ((raw >> bit) & 1n) === 1n;

/** Bits pinned as lists of accepted booleans: one check for the group; nothing pinned is "not pinned". */
function bitsCheck<K extends string>(
  name: string,
  what: string,
  raw: bigint,
  table: Record<K, { bit: bigint; set: string }>,
  pins: { readonly [k: string]: readonly boolean[] | undefined } | undefined,
  hint: string,
): Check {
  const state = (Object.keys(table) as K[]).map((k) => `${k} ${isSet(raw, table[k].bit) ? 'set' : 'clear'}`).join(', ');
  const pinned = (Object.keys(table) as K[]).filter((k) => pins?.[k] !== undefined);
  if (pinned.length === 0) return notPinned(name, `${what} 0x${raw.toString(16)} (${state}) was compared with nothing: no reference value pins it (${hint})`);
  const wrong = pinned.filter((k) => !pins![k]!.includes(isSet(raw, table[k].bit)));
  if (wrong.length === 0)
    return pass(name, `${what} 0x${raw.toString(16)}: ${pinned.map((k) => `${k} ${isSet(raw, table[k].bit) ? 'set' : 'clear'}`).join(', ')}, as pinned`);
  return fail(
    name,
    `${what} 0x${raw.toString(16)}: ${wrong.map((k) => `${k} is ${isSet(raw, table[k].bit) ? 'set' : 'clear'} (${table[k].set} when set), accepted: ${pins![k]!.map((b) => (b ? 'set' : 'clear')).join(' or ')}`).join('; ')}`,
  );
}

export interface SnpFirmwareVersion {
  build: number;
  minor: number;
  major: number;
}

/** CURRENT_BUILD/MINOR/MAJOR (0x1E8) and COMMITTED_BUILD/MINOR/MAJOR (0x1EC) of the SEV firmware. */
export function snpFirmwareVersions(reportBytes: Uint8Array): { current: SnpFirmwareVersion; committed: SnpFirmwareVersion } {
  const at = (o: number): SnpFirmwareVersion => ({ build: reportBytes[o]!, minor: reportBytes[o + 1]!, major: reportBytes[o + 2]! });
  return { current: at(0x1e8), committed: at(0x1ec) };
}

const versionText = (v: SnpFirmwareVersion): string => `${v.major}.${v.minor} build ${v.build}`;
const below = (v: SnpFirmwareVersion, min: { major: number; minor: number }): boolean => v.major < min.major || (v.major === min.major && v.minor < min.minor);

function provisionalCheck(report: SnpReport, versions: ReturnType<typeof snpFirmwareVersions>, ref: SnpReferenceValues | undefined): Check {
  const { current, committed } = versions;
  const sameTcb = report.currentTcb.raw === report.committedTcb.raw;
  const sameVersion = current.build === committed.build && current.minor === committed.minor && current.major === committed.major;
  const tcb = (raw: bigint) => `0x${raw.toString(16).padStart(16, '0')}`;
  if (sameTcb && sameVersion)
    return pass(
      'snp.provisional_firmware',
      `the running firmware (${versionText(current)}, TCB ${tcb(report.currentTcb.raw)}) is the committed one: it cannot be rolled back below what the report shows`,
    );
  const what = `the running firmware (${versionText(current)}, TCB ${tcb(report.currentTcb.raw)}) is provisional: the committed one is ${versionText(committed)}, TCB ${tcb(report.committedTcb.raw)}, and the machine may go back to it`;
  return ref?.permit_provisional_firmware === true
    ? pass('snp.provisional_firmware', `${what} (permitted: snp.permit_provisional_firmware)`)
    : fail('snp.provisional_firmware', `${what}; accept that with snp.permit_provisional_firmware: true`);
}

function firmwareFloorCheck(versions: ReturnType<typeof snpFirmwareVersions>, ref: SnpReferenceValues | undefined): Check {
  const { current, committed } = versions;
  const shown = `current ${versionText(current)}, committed ${versionText(committed)}`;
  if (ref?.min_build === undefined && ref?.min_api_version === undefined) {
    return notPinned('snp.firmware_version', `SEV firmware ${shown} was compared with nothing: no minimum (snp.min_build, snp.min_api_version) was given`);
  }
  const low: string[] = [];
  for (const [which, v] of [
    ['current', current],
    ['committed', committed],
  ] as const) {
    if (ref.min_build !== undefined && v.build < ref.min_build) low.push(`${which} build ${v.build} < ${ref.min_build}`);
    if (ref.min_api_version !== undefined && below(v, ref.min_api_version))
      low.push(`${which} API ${v.major}.${v.minor} < ${ref.min_api_version.major}.${ref.min_api_version.minor}`);
  }
  return low.length === 0
    ? pass('snp.firmware_version', `SEV firmware ${shown} is at or above the minimum`)
    : fail('snp.firmware_version', `SEV firmware ${shown}: ${low.join('; ')}; firmware this old lacks fixes the auditor requires`);
}

function listCheck(value: string, pins: string[] | undefined): boolean | undefined {
  return pins === undefined ? undefined : pins.includes(value);
}

function idBlockCheck(report: SnpReport, ref: SnpReferenceValues | undefined): Check {
  const fields: Array<[string, string, string[] | undefined]> = [
    ['family_id', toHex(report.familyId), ref?.family_id],
    ['image_id', toHex(report.imageId), ref?.image_id],
    ['id_key_digest', toHex(report.idKeyDigest), ref?.id_key_digest],
    ['author_key_digest', toHex(report.authorKeyDigest), ref?.author_key_digest],
  ];
  const pinned = fields.filter(([, , pins]) => pins !== undefined);
  if (pinned.length === 0 && ref?.min_guest_svn === undefined) {
    return notPinned(
      'snp.id_block',
      `the guest's ID block (family id ${fields[0]![1]}, image id ${fields[1]![1]}, ID key ${fields[2]![1].slice(0, 16)}..., guest SVN ${report.guestSvn}) was compared with nothing: no reference value pins it (snp.family_id, snp.image_id, snp.id_key_digest, snp.author_key_digest, snp.min_guest_svn)`,
    );
  }
  const wrong = pinned
    .filter(([, value, pins]) => listCheck(value, pins) === false)
    .map(([k, value]) => `${k} ${value.length > 32 ? `${value.slice(0, 16)}...` : value} is not an accepted value`);
  if (ref?.author_key_digest !== undefined && !report.authorKeyEnabled) wrong.push('AUTHOR_KEY_EN is clear: no author key signed the ID key');
  if (ref?.min_guest_svn !== undefined && report.guestSvn < ref.min_guest_svn) wrong.push(`guest SVN ${report.guestSvn} < ${ref.min_guest_svn}`);
  const names = [...pinned.map(([k]) => k), ...(ref?.min_guest_svn === undefined ? [] : ['min_guest_svn'])].join(', ');
  return wrong.length === 0
    ? pass('snp.id_block', `the guest's ID block matches the pinned ${names}: the guest owner's signed launch identity is the expected one`)
    : fail('snp.id_block', `${wrong.join('; ')}: the guest was not launched with the identity the auditor expects`);
}

const NO_MIGRATION_AGENT = 'ff'.repeat(32);

/** REPORT_ID_MA in words: all ones is the firmware's way of saying no migration agent is bound to the guest. */
function migrationAgentText(reportIdMa: string): string {
  return reportIdMa === NO_MIGRATION_AGENT
    ? 'REPORT_ID_MA is all ones: no migration agent is bound to this guest'
    : `REPORT_ID_MA ${reportIdMa.slice(0, 16)}...: a migration agent is bound to this guest`;
}

function instanceCheck(report: SnpReport, ref: SnpReferenceValues | undefined): Check {
  const chip = toHex(report.chipId);
  const reportId = toHex(report.reportId);
  const reportIdMa = toHex(report.reportIdMa);
  if (ref?.chip_id === undefined && ref?.report_id === undefined && ref?.report_id_ma === undefined) {
    return notPinned(
      'snp.instance',
      `CHIP_ID ${chip.slice(0, 16)}... and REPORT_ID ${reportId.slice(0, 16)}... were compared with nothing (${migrationAgentText(reportIdMa)}): no machine allow-list (snp.chip_id), guest (snp.report_id) or migration agent (snp.report_id_ma) is pinned, so any AMD machine passes`,
    );
  }
  const wrong: string[] = [];
  if (ref.chip_id !== undefined && !ref.chip_id.includes(chip))
    wrong.push(
      report.chipId.every((b) => b === 0)
        ? `CHIP_ID is all zeros (the host masked it), so the machine cannot be matched with the ${ref.chip_id.length} allowed machine(s) by CHIP_ID`
        : `CHIP_ID ${chip.slice(0, 16)}... is not one of the ${ref.chip_id.length} allowed machine(s)`,
    );
  if (ref.report_id !== undefined && !ref.report_id.includes(reportId)) wrong.push(`REPORT_ID ${reportId.slice(0, 16)}... is not the pinned guest`);
  if (ref.report_id_ma !== undefined && !ref.report_id_ma.includes(reportIdMa)) {
    wrong.push(
      `${migrationAgentText(reportIdMa)}, which is not the pinned ${ref.report_id_ma.includes(NO_MIGRATION_AGENT) ? 'value (all ones: no migration agent)' : 'migration agent'}`,
    );
  }
  if (wrong.length > 0) return fail('snp.instance', `${wrong.join('; ')}: the report comes from elsewhere`);
  const pinned = [
    ...(ref.chip_id === undefined ? [] : ['CHIP_ID']),
    ...(ref.report_id === undefined ? [] : ['REPORT_ID']),
    ...(ref.report_id_ma === undefined ? [] : ['REPORT_ID_MA']),
  ];
  return pass('snp.instance', `${pinned.join(', ')} as pinned (${migrationAgentText(reportIdMa)}): this is one of the machines and guests the auditor named`);
}

const hex64 = (n: bigint): string => `0x${n.toString(16)}`;

/** go-sev-guest's MinimumLaunchMitigationVector / MinimumCurrentMitigationVector: every required bit set (report v5). */
function mitigationCheck(report: SnpReport, ref: SnpReferenceValues | undefined): Check {
  const required = { launch: ref?.min_launch_mit_vector, current: ref?.min_current_mit_vector };
  const keys = 'snp.min_launch_mit_vector, snp.min_current_mit_vector';
  const v = report.mitigationVectors;
  if (v === undefined) {
    const absent = `report version ${report.version} carries no mitigation vectors (version 5 adds LAUNCH_MIT_VECTOR and CURRENT_MIT_VECTOR)`;
    return required.launch === undefined && required.current === undefined
      ? notPinned('snp.mitigation_vector', `${absent}; none is required (${keys})`)
      : fail('snp.mitigation_vector', `not checked: ${absent}, but the reference values require mitigation bits: the firmware cannot show it applies them`);
  }
  const shown = `LAUNCH_MIT_VECTOR ${hex64(v.launch)}, CURRENT_MIT_VECTOR ${hex64(v.current)}`;
  if (required.launch === undefined && required.current === undefined)
    return notPinned('snp.mitigation_vector', `${shown} were compared with nothing: no required mitigation bits (${keys}) were given`);
  const missing = (['launch', 'current'] as const)
    .filter((k) => required[k] !== undefined && (v[k] & required[k]) !== required[k])
    .map((k) => `${k.toUpperCase()}_MIT_VECTOR lacks bits ${hex64(required[k]! & ~v[k])} of the required ${hex64(required[k]!)}`);
  return missing.length === 0
    ? pass('snp.mitigation_vector', `${shown}: every required mitigation bit is set`)
    : fail('snp.mitigation_vector', `${shown}: ${missing.join('; ')}: the firmware does not apply mitigations the auditor requires`);
}

/** AMD product line from CPUID family and model (report v3+): the line whose keys must have signed the report. */
export function snpProductLine(family: number, model: number): string | null {
  if (family === 0x19 && model <= 0x0f) return 'Milan';
  if (family === 0x19 && ((model >= 0x10 && model <= 0x1f) || (model >= 0xa0 && model <= 0xaf))) return 'Genoa';
  if (family === 0x1a) return 'Turin';
  return null;
}

const PRODUCT_LINES = ['Milan', 'Genoa', 'Turin'];

/** Known line against known line fails on a difference; a CPU or an issuer that names no known line is "not compared". */
function productCheck(report: SnpReport, reportBytes: Uint8Array, signer: X509Certificate | undefined): Check {
  if (report.version < 3)
    return notPinned(
      'snp.product',
      `report version ${report.version} names no CPU (CPUID appears in version 3), so the product line was not compared with the chain`,
    );
  const family = reportBytes[0x188]!;
  const model = reportBytes[0x189]!;
  const cpu = `CPUID family 0x${family.toString(16)} model 0x${model.toString(16)}`;
  const line = snpProductLine(family, model);
  if (line === null) return notPinned('snp.product', `${cpu} is no AMD product line Sigil knows (Milan, Genoa, Turin), so it was not compared with the chain`);
  if (signer === undefined) return fail('snp.product', `the report is from a ${line} CPU, but there is no signing certificate to compare with`);
  const issuer = /CN=([^\n,]+)/.exec(signer.issuer)?.[1] ?? '';
  const chainLine = /^SEV-(?:VLEK-)?(\w+)$/.exec(issuer)?.[1];
  if (chainLine === undefined || !PRODUCT_LINES.includes(chainLine))
    return notPinned(
      'snp.product',
      `the report is from a ${line} CPU (${cpu}); the signing key's issuer ${issuer || '(none)'} names no AMD product line to compare with`,
    );
  return chainLine === line
    ? pass('snp.product', `${cpu} is ${line}, and the signing key was issued by ${issuer}: the same product line`)
    : fail('snp.product', `the report says a ${line} CPU (${cpu}) but ${commonName(signer)} was issued by ${issuer}: the key is another product line's`);
}

/**
 * The SEV-SNP checks of go-sev-guest's validate beyond the platform policy: committed vs running firmware, firmware
 * floors, the other guest policy bits, PLATFORM_INFO, the ID block, the machine allow-list, and the product line.
 */
export function snpGuestChecks(report: SnpReport, reportBytes: Uint8Array, signer: X509Certificate | undefined, ref: SnpReferenceValues | undefined): Check[] {
  const versions = snpFirmwareVersions(reportBytes);
  return [
    provisionalCheck(report, versions, ref),
    firmwareFloorCheck(versions, ref),
    bitsCheck(
      'snp.guest_policy',
      'guest policy',
      report.policy.raw,
      SNP_POLICY_BITS,
      ref?.policy,
      'snp.policy.single_socket, cxl_allowed, mem_aes_256_xts, rapl_disabled, ciphertext_hiding, page_swap_disabled',
    ),
    bitsCheck(
      'snp.platform_info',
      'PLATFORM_INFO',
      report.platformInfo,
      SNP_PLATFORM_INFO_BITS,
      ref?.platform_info,
      'snp.platform_info.smt_enabled, tsme_enabled, ecc_enabled, rapl_disabled, ciphertext_hiding_enabled, alias_check_complete',
    ),
    idBlockCheck(report, ref),
    instanceCheck(report, ref),
    mitigationCheck(report, ref),
    productCheck(report, reportBytes, signer),
  ];
}
