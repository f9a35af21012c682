import { fail, notPinned, pass } from '../check.ts';
import type { Check } from '../check.ts';
import type { TcbStatus, TdxReferenceValues } from '../reference/reference-values.ts';
import { toHex } from './byte-reader.ts';
import type { TdxReportBody } from './tdx-quote.ts';

/** TDATTRIBUTES bits worth naming (Intel TDX Module ABI, TDATTRIBUTES). */
const TD_ATTRIBUTE_BITS: Array<[number, string]> = [
  [0, 'DEBUG'],
  [28, 'SEPT_VE_DISABLE'],
  [30, 'PKS'],
  [31, 'KL'],
  [63, 'PERFMON'],
];

function bitsSet(le: Uint8Array): string {
  const value = Buffer.from(le).readBigUInt64LE(0);
  const named = TD_ATTRIBUTE_BITS.filter(([bit]) => ((value >> BigInt(bit)) & 1n) === 1n).map(([, name]) => name);
  return named.length === 0 ? 'no named bits set' : `${named.join(', ')} set`;
}

function pinnedBytes(name: string, label: string, covers: string, value: Uint8Array, accepted: string[] | undefined): Check {
  const hex = toHex(value);
  if (accepted === undefined) return notPinned(name, `${label} ${hex} (${covers}) was compared with nothing: no reference value pins it`);
  return accepted.includes(hex)
    ? pass(name, `${label} ${hex} is an accepted reference value: ${covers} is as the auditor expects`)
    : fail(name, `${label} ${hex} is none of the accepted values (${accepted.join(', ')}): ${covers} differs from what the auditor expects`);
}

/** MRCONFIGID, MROWNER, MROWNERCONFIG: pinned, or else they must be all zero, the value when the host sets none. */
function zeroByDefault(name: string, label: string, covers: string, value: Uint8Array, accepted: string[] | undefined): Check {
  if (accepted !== undefined) return pinnedBytes(name, label, covers, value, accepted);
  const hex = toHex(value);
  return /^0+$/.test(hex)
    ? pass(name, `${label} is all zero, as when the host sets none (no reference value pins another): ${covers} is empty`)
    : fail(
        name,
        `${label} ${hex} is not zero and no reference value pins it: the host gave the TD ${covers} nobody vouched for; pin it (tdx.${name.slice(4)}) if it is expected`,
      );
}

function svnFloorCheck(svn: Uint8Array, floor: string | undefined): Check {
  const hex = toHex(svn);
  if (floor === undefined)
    return notPinned(
      'tdx.tee_tcb_svn',
      `TEE_TCB_SVN ${hex} (the TDX module's security version) was compared with nothing: no minimum (tdx.min_tee_tcb_svn) was given`,
    );
  const min = Buffer.from(floor, 'hex');
  const low = [...svn].map((b, i) => ({ b, i, m: min[i]! })).filter(({ b, m }) => b < m);
  return low.length === 0
    ? pass('tdx.tee_tcb_svn', `TEE_TCB_SVN ${hex} is at or above the floor ${floor} in every component: the TDX module carries the fixes the auditor requires`)
    : fail(
        'tdx.tee_tcb_svn',
        `TEE_TCB_SVN ${hex} is below the floor ${floor} (${low.map(({ b, i, m }) => `component ${i}: ${b} < ${m}`).join('; ')}): the TDX module predates fixes the auditor requires`,
      );
}

/** Intel's verdict on this platform's TCB, from verified collateral (see collateral/). */
export interface TdxTcbVerdict {
  /** null when no status could be established from the collateral; `source` says why. */
  status: TcbStatus | null;
  advisoryIds: string[];
  /** Where the verdict came from, e.g. "TCB info for FMSPC 50806f000000, level of 2023-02-15". */
  source: string;
  /** The TCB info's tcbEvaluationDataNumber: which of Intel's TCB recoveries the verdict reflects. */
  evaluationDataNumber?: number;
}

const STATUS_MEANING: Record<TcbStatus, string> = {
  UpToDate: 'the platform has every security update Intel published',
  SWHardeningNeeded: 'the platform is up to date but the software must apply mitigations Intel names',
  ConfigurationNeeded: 'the platform needs a BIOS configuration change to be secure',
  ConfigurationAndSWHardeningNeeded: 'the platform needs a configuration change and software mitigations',
  OutOfDate: 'the platform lacks security updates Intel published',
  OutOfDateConfigurationNeeded: 'the platform lacks security updates and needs a configuration change',
  Revoked: "Intel revoked this platform's TCB: its keys cannot be trusted",
};

export function tcbStatusCheck(verdict: TdxTcbVerdict | undefined, accepted: TcbStatus[] | undefined, minEvaluation?: number): Check {
  if (verdict === undefined && minEvaluation !== undefined) {
    return fail(
      'tdx.tcb_status',
      `not checked: the reference values ask for Intel collateral of evaluation ${minEvaluation} or later, but no collateral was given (--collateral DIR)`,
    );
  }
  if (verdict !== undefined && minEvaluation !== undefined && (verdict.evaluationDataNumber ?? -1) < minEvaluation) {
    return fail(
      'tdx.tcb_status',
      `${verdict.source}: the collateral is of TCB evaluation ${verdict.evaluationDataNumber ?? 'unknown'}, older than the minimum ${minEvaluation} (tdx.min_tcb_evaluation_data_number): it predates TCB recoveries the auditor requires`,
    );
  }
  if (verdict === undefined) {
    return accepted === undefined
      ? notPinned(
          'tdx.tcb_status',
          "Intel's TCB status was not checked: no collateral given (--collateral DIR), so an out-of-date or revoked platform would pass",
        )
      : fail('tdx.tcb_status', `not checked: the reference values accept TCB status ${accepted.join(' or ')}, but no collateral was given (--collateral DIR)`);
  }
  const allowed = accepted ?? ['UpToDate'];
  if (verdict.status === null) return fail('tdx.tcb_status', `Intel's TCB status could not be established: ${verdict.source}`);
  const advisories = verdict.advisoryIds.length === 0 ? 'no advisories' : `advisories ${verdict.advisoryIds.join(', ')}`;
  const text = `${verdict.source}: status ${verdict.status} (${STATUS_MEANING[verdict.status]}), ${advisories}`;
  const evaluation = minEvaluation === undefined ? '' : `; TCB evaluation ${verdict.evaluationDataNumber} is at or above the minimum ${minEvaluation}`;
  return allowed.includes(verdict.status) && verdict.status !== 'Revoked'
    ? pass('tdx.tcb_status', `${text}; accepted${accepted === undefined ? ' (the default accepts only UpToDate)' : ''}${evaluation}`)
    : fail('tdx.tcb_status', `${text}; accepted are ${allowed.join(', ')}${accepted === undefined ? ' (the default; pin tdx.tcb_status to accept more)' : ''}`);
}

/**
 * TDX platform policy (docs/auditing.md#4-what-each-check-means-and-what-it-stops): debug off always; TD attributes, XFAM, MRSEAM and the TEE_TCB_SVN floor as
 * pinned; MRCONFIGID, MROWNER, MROWNERCONFIG as pinned or else zero; Intel's TCB status when collateral was given.
 */
export function tdxPlatformChecks(body: TdxReportBody, ref: TdxReferenceValues | undefined, verdict?: TdxTcbVerdict): Check[] {
  const attrs = toHex(body.tdAttributes);
  const debug = (body.tdAttributes[0]! & 1) === 1;
  return [
    debug
      ? fail('tdx.debug', `TDATTRIBUTES ${attrs} has DEBUG set: the host can read and change the TD's memory and registers, so nothing in it is confidential`)
      : pass('tdx.debug', `TDATTRIBUTES ${attrs} has DEBUG clear: the host cannot debug the TD`),
    pinnedBytes('tdx.td_attributes', 'TDATTRIBUTES', `the TD's features (${bitsSet(body.tdAttributes)})`, body.tdAttributes, ref?.td_attributes),
    pinnedBytes('tdx.xfam', 'XFAM', 'the CPU extended features (AVX, AMX, ...) the TD may use', body.xfam, ref?.xfam),
    zeroByDefault('tdx.mr_config_id', 'MRCONFIGID', 'a configuration identity', body.mrConfigId, ref?.mr_config_id),
    zeroByDefault('tdx.mr_owner', 'MROWNER', 'an owner identity', body.mrOwner, ref?.mr_owner),
    zeroByDefault('tdx.mr_owner_config', 'MROWNERCONFIG', 'an owner configuration', body.mrOwnerConfig, ref?.mr_owner_config),
    pinnedBytes('tdx.mrseam', 'MRSEAM', 'the TDX module that isolates the TD', body.mrSeam, ref?.mrseam),
    svnFloorCheck(body.teeTcbSvn, ref?.min_tee_tcb_svn),
    tcbStatusCheck(verdict, ref?.tcb_status, ref?.min_tcb_evaluation_data_number),
  ];
}
