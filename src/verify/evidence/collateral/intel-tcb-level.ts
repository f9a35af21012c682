import { toHex } from '../byte-reader.ts';
import type { TcbStatus } from '../../reference/reference-values.ts';
import type { TdxTcbVerdict } from '../tdx-policy.ts';
import { untrusted, type IntelCollateralStage, type TcbLevel } from './intel-collateral-stage.ts';
import { knownStatus } from './intel-signed-collateral.ts';
import type { PckExtension } from './pck-extension.ts';
import { worseStatus } from './tdx-module.ts';

/**
 * Intel's TCB level matching for TDX (Intel TDX DCAP Quote Verification, "TCB level determination"): the first level,
 * in the order Intel lists them, whose SGX components and PCESVN the PCK certificate meets and whose TDX components
 * the quote's TEE_TCB_SVN meets.
 */
export function matchTdxTcbLevel(levels: readonly TcbLevel[], pck: Pick<PckExtension, 'compSvn' | 'pceSvn'>, teeTcbSvn: Uint8Array): TcbLevel | undefined {
  return levels.find(
    (level) =>
      level.tcb.sgxtcbcomponents.every((c, i) => (pck.compSvn[i] ?? 0) >= c.svn) &&
      pck.pceSvn >= level.tcb.pcesvn &&
      level.tcb.tdxtcbcomponents.every((c, i) => (teeTcbSvn[i] ?? 0) >= c.svn),
  );
}

/** Intel's convergence of the platform's and the Quoting Enclave's status: an out-of-date QE makes the platform out of date. */
function converge(platform: TcbStatus, qe: TcbStatus | undefined): TcbStatus {
  if (qe === undefined || qe === 'UpToDate' || qe === 'SWHardeningNeeded' || qe === 'ConfigurationNeeded' || qe === 'ConfigurationAndSWHardeningNeeded')
    return platform;
  if (qe === 'Revoked' || platform === 'Revoked') return 'Revoked';
  if (platform === 'ConfigurationNeeded' || platform === 'ConfigurationAndSWHardeningNeeded' || platform === 'OutOfDateConfigurationNeeded')
    return 'OutOfDateConfigurationNeeded';
  return 'OutOfDate';
}

/**
 * Intel's verdict on the platform (go-tdx-guest's second half), only from TCB info that passed every check before: the
 * TCB level the PCK's and the quote's SVNs meet, its status converged with the Quoting Enclave's and the TDX module's.
 */
export function tdxTcbVerdict(s: IntelCollateralStage): TdxTcbVerdict {
  const { tcbInfo, pckExt, quote, moduleStatus } = s;
  if (tcbInfo === undefined || pckExt === undefined) return untrusted('no trusted TCB info for this platform');
  const level = matchTdxTcbLevel(tcbInfo.tcbLevels, pckExt, quote.body.teeTcbSvn);
  const where = `Intel's TCB info for FMSPC ${tcbInfo.fmspc}`;
  if (level === undefined) {
    return untrusted(
      `no TCB level of ${where} is met by this platform (PCK SGX components ${pckExt.compSvn.join('.')}, PCESVN ${pckExt.pceSvn}, TEE_TCB_SVN ${toHex(quote.body.teeTcbSvn)}): its TCB is older than any Intel supports`,
    );
  }
  const platform = knownStatus(level.tcbStatus);
  if (platform === undefined) return untrusted(`${where} gives the unknown status ${JSON.stringify(level.tcbStatus)}`);
  const converged = converge(platform, s.qe?.status);
  // The TDX module's own status counts too (Intel's QVL, dcap-qvl): the worse one wins.
  const status = moduleStatus === undefined ? converged : worseStatus(converged, moduleStatus.status);
  const advisoryIds = [...new Set([...(level.advisoryIDs ?? []), ...(s.qe?.advisoryIds ?? []), ...(moduleStatus?.advisoryIds ?? [])])];
  const notes = [
    ...(converged === platform ? [] : [`platform ${platform}, Quoting Enclave ${s.qe?.status}`]),
    ...(moduleStatus === undefined || status === converged ? [] : [`${moduleStatus.source}: ${moduleStatus.status}`]),
  ];
  const qeNote = notes.length === 0 ? '' : ` (${notes.join('; ')})`;
  const evaluation = (tcbInfo as unknown as { tcbEvaluationDataNumber?: unknown }).tcbEvaluationDataNumber;
  const verdict: TdxTcbVerdict = { status, advisoryIds, source: `${where}, TCB level of ${level.tcbDate.slice(0, 10)}${qeNote}` };
  if (typeof evaluation === 'number') verdict.evaluationDataNumber = evaluation;
  return verdict;
}
