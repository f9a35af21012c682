import { fail, pass } from '../../check.ts';
import type { Check } from '../../check.ts';
import { TCB_STATUSES, type TcbStatus } from '../../reference/reference-values.ts';
import { toHex } from '../byte-reader.ts';
import type { TdxReportBody } from '../tdx-quote.ts';

interface ModuleIdentity {
  mrsigner: string;
  attributes: string;
  attributesMask: string;
}

interface ModuleTcbLevel {
  tcb: { isvsvn: number };
  tcbDate: string;
  tcbStatus: string;
  advisoryIDs?: string[];
}

/** The TDX module parts of Intel's TDX TCB info v3: the module's signer, and per module version its TCB levels. */
export interface TdxModuleTcbInfo {
  tdxModule?: ModuleIdentity;
  tdxModuleIdentities?: Array<ModuleIdentity & { id: string; tcbLevels: ModuleTcbLevel[] }>;
}

/** Intel's status for the TDX module itself, folded into the platform's by `worseStatus`. */
export interface TdxModuleStatus {
  status: TcbStatus;
  advisoryIds: string[];
  /** e.g. "TDX module TDX_01, ISVSVN 6, level of 2024-03-13". */
  source: string;
}

export interface TdxModuleResult {
  check: Check;
  /** Present when the TCB info has TCB levels for this module version. */
  status?: TdxModuleStatus;
}

/** Intel's order of severity (as Intel's QVL and dcap-qvl merge statuses): the worse of two wins. */
const SEVERITY: readonly TcbStatus[] = [
  'UpToDate',
  'SWHardeningNeeded',
  'ConfigurationNeeded',
  'ConfigurationAndSWHardeningNeeded',
  'OutOfDate',
  'OutOfDateConfigurationNeeded',
  'Revoked',
];

export function worseStatus(a: TcbStatus, b: TcbStatus): TcbStatus {
  return SEVERITY.indexOf(b) > SEVERITY.indexOf(a) ? b : a;
}

function masked(actual: Uint8Array, expectedHex: string, maskHex: string): 'equal' | 'differs' | 'outside mask' {
  const expected = Buffer.from(expectedHex, 'hex');
  const mask = Buffer.from(maskHex, 'hex');
  if (expected.length !== actual.length || mask.length !== actual.length) return 'differs';
  if (!actual.every((b, i) => (b & mask[i]!) === (expected[i]! & mask[i]!))) return 'differs';
  return actual.every((b, i) => (b & ~mask[i]!) === 0) ? 'equal' : 'outside mask';
}

/**
 * `tdx.module_identity`, as Intel's QVL and dcap-qvl decide it: TEE_TCB_SVN byte 1 is the module's major version and
 * byte 0 its ISVSVN; for a version above 0 the TCB info's `tdxModuleIdentities` entry `TDX_{version}` (else
 * `tdxModule`) names the signer MRSIGNERSEAM must equal and the SEAMATTRIBUTES (masked; no bit outside the mask);
 * that entry's first TCB level whose ISVSVN the module meets gives the module's own status and advisories.
 */
export function tdxModuleCheck(info: TdxModuleTcbInfo, body: Pick<TdxReportBody, 'teeTcbSvn' | 'mrSignerSeam' | 'seamAttributes'>): TdxModuleResult {
  const isvsvn = body.teeTcbSvn[0]!;
  const version = body.teeTcbSvn[1]!;
  if (info.tdxModule === undefined)
    return { check: fail('tdx.module_identity', "Intel's TDX TCB info has no tdxModule: the TDX module's signer cannot be checked") };
  const wanted = `TDX_${version.toString(16).toUpperCase().padStart(2, '0')}`;
  const identities = info.tdxModuleIdentities ?? [];
  const identity = version > 0 && identities.length > 0 ? identities.find((i) => i.id.toUpperCase() === wanted) : undefined;
  if (version > 0 && identities.length > 0 && identity === undefined) {
    return {
      check: fail(
        'tdx.module_identity',
        `TEE_TCB_SVN names TDX module version ${version}, but Intel's TCB info lists no ${wanted} (only ${identities.map((i) => i.id).join(', ')}): a module Intel does not know`,
      ),
    };
  }
  const expected = identity ?? info.tdxModule;
  const name = identity === undefined ? 'the TDX module' : `TDX module ${identity.id}`;
  const signer = toHex(body.mrSignerSeam);
  if (signer !== expected.mrsigner.toLowerCase()) {
    return {
      check: fail(
        'tdx.module_identity',
        `MRSIGNERSEAM ${signer} is not the signer Intel lists for ${name} (${expected.mrsigner.toLowerCase()}): the module isolating the TD is not one Intel signed`,
      ),
    };
  }
  const attributes = masked(body.seamAttributes, expected.attributes, expected.attributesMask);
  if (attributes !== 'equal') {
    return {
      check: fail(
        'tdx.module_identity',
        `SEAMATTRIBUTES ${toHex(body.seamAttributes)} ${attributes === 'differs' ? 'differ from' : 'set bits outside the mask of'} Intel's identity for ${name} (${expected.attributes.toLowerCase()}, mask ${expected.attributesMask.toLowerCase()})`,
      ),
    };
  }
  const signedBy = `MRSIGNERSEAM and SEAMATTRIBUTES match Intel's identity for ${name}`;
  if (identity === undefined)
    return { check: pass('tdx.module_identity', `${signedBy}: the TDX module is Intel's (the TCB info gives no TCB levels for module version ${version})`) };
  const level = identity.tcbLevels.find((l) => isvsvn >= l.tcb.isvsvn);
  if (level === undefined) {
    return {
      check: fail(
        'tdx.module_identity',
        `${signedBy}, but its ISVSVN ${isvsvn} is below every TCB level Intel lists for it (lowest ${Math.min(...identity.tcbLevels.map((l) => l.tcb.isvsvn))}): a module older than any Intel supports`,
      ),
    };
  }
  if (!(TCB_STATUSES as readonly string[]).includes(level.tcbStatus)) {
    return { check: fail('tdx.module_identity', `${signedBy}; Intel gives its ISVSVN ${isvsvn} the unknown status ${JSON.stringify(level.tcbStatus)}`) };
  }
  const advisoryIds = level.advisoryIDs ?? [];
  const status: TdxModuleStatus = {
    status: level.tcbStatus as TcbStatus,
    advisoryIds,
    source: `TDX module ${identity.id}, ISVSVN ${isvsvn}, level of ${level.tcbDate.slice(0, 10)}`,
  };
  const advisories = advisoryIds.length === 0 ? 'no advisories' : `advisories ${advisoryIds.join(', ')}`;
  return {
    check: pass(
      'tdx.module_identity',
      `${signedBy}: the TDX module is Intel's; Intel rates its ISVSVN ${isvsvn} ${level.tcbStatus} (level of ${level.tcbDate.slice(0, 10)}, ${advisories}), which tdx.tcb_status takes into account`,
    ),
    status,
  };
}
