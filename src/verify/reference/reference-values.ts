import { parse as parseYaml } from 'yaml';
import { SNP_PLATFORM_INFO_BITS, SNP_POLICY_BITS, type SnpPlatformInfoBit, type SnpPolicyBit } from '../evidence/snp-bits.ts';
import { SigilError } from '../../protocol/sigil-error.ts';
import { isReleaseVersion } from '../release/release-version.ts';

/**
 * Reference values (docs/auditing.md#2-write-the-reference-values-file): what an auditor expects the evidence to show, obtained independently of the
 * service (a reproducible build, a vendor's published values). Every key is optional; an absent key is "not
 * pinned" and reported as such. Byte values are lowercase hex; each pinned value is a list of accepted values.
 */
export interface TdxReferenceValues {
  mrtd?: string[];
  rtmr0?: string[];
  rtmr1?: string[];
  rtmr2?: string[];
  rtmr3?: string[];
  mr_config_id?: string[];
  mr_owner?: string[];
  mr_owner_config?: string[];
  td_attributes?: string[];
  xfam?: string[];
  mrseam?: string[];
  /** A floor: every one of the 16 TEE_TCB_SVN bytes must be at least this value's byte. */
  min_tee_tcb_svn?: string;
  /** Intel TCB statuses accepted for this platform (needs collateral); default: UpToDate only. */
  tcb_status?: TcbStatus[];
  /** Floors for the quote header's QE SVN and PCE SVN. */
  min_qe_svn?: number;
  min_pce_svn?: number;
  /** The oldest Intel TCB evaluation (tcbEvaluationDataNumber) whose collateral is accepted; needs collateral. */
  min_tcb_evaluation_data_number?: number;
  /** A machine allow-list: the PPIDs (Intel's platform provisioning ids, from the PCK certificate) the auditor accepts. */
  ppid?: string[];
  /** A machine allow-list by the PCK certificate's platform instance id (multi-package platforms). */
  platform_instance_id?: string[];
}

export interface SnpMinTcb {
  bootloader?: number;
  tee?: number;
  snp?: number;
  microcode?: number;
  /** Turin and later only. */
  fmc?: number;
}

export interface SnpReferenceValues {
  measurement?: string[];
  host_data?: string[];
  vmpl?: number[];
  min_tcb?: SnpMinTcb;
  policy?: { debug?: false[]; migrate_ma?: boolean[]; smt?: boolean[] } & Partial<Record<SnpPolicyBit, boolean[]>>;
  platform_info?: Partial<Record<SnpPlatformInfoBit, boolean[]>>;
  /** Accept firmware that runs but is not committed (go-sev-guest's PermitProvisionalFirmware); default false. */
  permit_provisional_firmware?: boolean;
  min_build?: number;
  min_api_version?: { major: number; minor: number };
  min_guest_svn?: number;
  family_id?: string[];
  image_id?: string[];
  id_key_digest?: string[];
  author_key_digest?: string[];
  report_id?: string[];
  /** A machine allow-list: the CHIP_IDs of the machines the auditor accepts. */
  chip_id?: string[];
  /** REPORT_ID_MA: the migration agent's report id for this guest; all ones (ff x 32) is the value when it has none. */
  report_id_ma?: string[];
  /** Bits LAUNCH_MIT_VECTOR / CURRENT_MIT_VECTOR (report v5) must all have set, as a 64-bit number. */
  min_launch_mit_vector?: bigint;
  min_current_mit_vector?: bigint;
  /** Accept evidence given without AMD's CRL: `snp.crl` is then WAIVED instead of failing; default false. */
  allow_missing_crl?: boolean;
}

export interface GpuReferenceValues {
  /** RIM files, resolved against the reference file's folder. */
  rims?: string[];
  /** Recorded DER OCSP responses for the GPU device and RIM signing chains, resolved like `rims`. */
  ocsp?: string[];
  /** The auditor's waiver: a certificate no recorded response covers is waived, not failed (default false). */
  ocsp_allow_missing?: boolean;
}

/** What the auditor expects of Sigil itself: the manifest digest `sigil measure self` printed, and whether operator-loaded keys are acceptable. */
export interface SigilReferenceValues {
  manifest_sha384?: string[];
  /** Default false: a key read from a file the operator controls fails `attestation.key_origin`. */
  accept_loaded_keys?: boolean;
}

/**
 * What the auditor requires of a release manifest given with `--release` (docs/release.md#what-the-verifier-requires):
 * the oldest release accepted, and the longest validity a manifest may state (30 days, the release workflow's own,
 * when not given).
 */
export interface ReleaseReferenceValues {
  min_version?: string;
  max_validity_days?: number;
}

export interface ReferenceValues {
  release?: ReleaseReferenceValues;
  sigil?: SigilReferenceValues;
  tdx?: TdxReferenceValues;
  snp?: SnpReferenceValues;
  gpu?: GpuReferenceValues;
}

export const TCB_STATUSES = [
  'UpToDate',
  'SWHardeningNeeded',
  'ConfigurationNeeded',
  'ConfigurationAndSWHardeningNeeded',
  'OutOfDate',
  'OutOfDateConfigurationNeeded',
  'Revoked',
] as const;
export type TcbStatus = (typeof TCB_STATUSES)[number];

/** A reference-values file that cannot be used; `key` names the offending key, e.g. `tdx.rtmr1[0]`. */
export class ReferenceValuesError extends SigilError<'ERR_REFERENCE_VALUES'> {
  readonly key: string | null;

  constructor(key: string | null, message: string) {
    super('ERR_REFERENCE_VALUES', key === null ? message : `${key}: ${message}`);
    this.key = key;
  }
}

/** Byte lengths of the hex-valued keys. */
const TDX_HEX: Record<string, number> = {
  mrtd: 48,
  rtmr0: 48,
  rtmr1: 48,
  rtmr2: 48,
  rtmr3: 48,
  mr_config_id: 48,
  mr_owner: 48,
  mr_owner_config: 48,
  td_attributes: 8,
  xfam: 8,
  mrseam: 48,
  ppid: 16,
  platform_instance_id: 16,
};
const TDX_KEYS = [...Object.keys(TDX_HEX), 'min_tee_tcb_svn', 'tcb_status', 'min_qe_svn', 'min_pce_svn', 'min_tcb_evaluation_data_number'];
const SNP_HEX: Record<string, number> = {
  measurement: 48,
  host_data: 32,
  family_id: 16,
  image_id: 16,
  id_key_digest: 48,
  author_key_digest: 48,
  report_id: 32,
  chip_id: 64,
  report_id_ma: 32,
};
const SNP_KEYS = [
  'measurement',
  'host_data',
  'vmpl',
  'min_tcb',
  'policy',
  'platform_info',
  'permit_provisional_firmware',
  'allow_missing_crl',
  'min_launch_mit_vector',
  'min_current_mit_vector',
  'min_build',
  'min_api_version',
  'min_guest_svn',
  ...Object.keys(SNP_HEX).slice(2),
];
const MIN_TCB_KEYS = ['bootloader', 'tee', 'snp', 'microcode', 'fmc'] as const;
const POLICY_KEYS = ['debug', 'migrate_ma', 'smt', ...Object.keys(SNP_POLICY_BITS)];
const PLATFORM_INFO_KEYS = Object.keys(SNP_PLATFORM_INFO_BITS);

type Node = string | Node[] | { [key: string]: Node };

function isMap(node: Node): node is { [key: string]: Node } {
  return typeof node === 'object' && !Array.isArray(node);
}

/** `key` null is the file's top level. */
function mapAt(node: Node, key: string | null, allowed: readonly string[]): Record<string, Node> {
  if (!isMap(node)) throw new ReferenceValuesError(key, 'must be a mapping of keys to values');
  for (const name of Object.keys(node)) {
    if (!allowed.includes(name)) {
      const where = key === null ? 'at the top level' : `under ${key}`;
      throw new ReferenceValuesError(key === null ? name : `${key}.${name}`, `unknown key (allowed ${where}: ${allowed.join(', ')})`);
    }
  }
  return node;
}

/** A single value or a list, as a non-empty list of scalars. */
function scalarList(node: Node, key: string): string[] {
  const list = Array.isArray(node) ? node : [node];
  if (list.length === 0) throw new ReferenceValuesError(key, 'an empty list accepts nothing; leave the key out to not pin it');
  return list.map((item, i) => {
    const at = Array.isArray(node) ? `${key}[${i}]` : key;
    if (typeof item !== 'string') throw new ReferenceValuesError(at, 'must be a single value, not a list or mapping');
    if (item === '') throw new ReferenceValuesError(at, 'has no value');
    return item.trim();
  });
}

function hexList(node: Node, key: string, bytes: number): string[] {
  return scalarList(node, key).map((value, i) => {
    const hex = value.toLowerCase();
    const at = Array.isArray(node) ? `${key}[${i}]` : key;
    if (!/^[0-9a-f]*$/.test(hex) || hex.length !== bytes * 2) {
      throw new ReferenceValuesError(at, `must be ${bytes * 2} hex digits (${bytes} bytes), got ${JSON.stringify(value)}`);
    }
    return hex;
  });
}

function single(node: Node, key: string): string {
  const list = scalarList(node, key);
  if (list.length !== 1) throw new ReferenceValuesError(key, 'is a minimum: give one value, not a list');
  return list[0]!;
}

function integer(value: string, key: string, max: number): number {
  if (!/^\d+$/.test(value) || Number(value) > max) throw new ReferenceValuesError(key, `must be an integer from 0 to ${max}, got ${JSON.stringify(value)}`);
  return Number(value);
}

function booleanValue(value: string, key: string): boolean {
  if (value === 'true') return true;
  if (value === 'false') return false;
  throw new ReferenceValuesError(key, `must be true or false, got ${JSON.stringify(value)}`);
}

function readTdx(node: Node): TdxReferenceValues {
  const map = mapAt(node, 'tdx', TDX_KEYS);
  const out: TdxReferenceValues = {};
  for (const [name, value] of Object.entries(map)) {
    const key = `tdx.${name}`;
    const bytes = TDX_HEX[name];
    if (bytes !== undefined) {
      out[name as keyof typeof TDX_HEX & keyof TdxReferenceValues] = hexList(value, key, bytes) as never;
    } else if (name === 'min_tee_tcb_svn') {
      out.min_tee_tcb_svn = hexList(single(value, key), key, 16)[0]!;
    } else if (name === 'min_qe_svn' || name === 'min_pce_svn') {
      out[name] = integer(single(value, key), key, 0xffff);
    } else if (name === 'min_tcb_evaluation_data_number') {
      out.min_tcb_evaluation_data_number = integer(single(value, key), key, 0xffffffff);
    } else {
      out.tcb_status = scalarList(value, key).map((status, i) => {
        if (!(TCB_STATUSES as readonly string[]).includes(status)) {
          throw new ReferenceValuesError(
            Array.isArray(value) ? `${key}[${i}]` : key,
            `unknown TCB status ${JSON.stringify(status)} (known: ${TCB_STATUSES.join(', ')})`,
          );
        }
        return status as TcbStatus;
      });
    }
  }
  return out;
}

function readSnp(node: Node): SnpReferenceValues {
  const map = mapAt(node, 'snp', SNP_KEYS);
  const out: SnpReferenceValues = {};
  for (const [name, value] of Object.entries(map)) {
    const key = `snp.${name}`;
    const bytes = SNP_HEX[name];
    if (bytes !== undefined) {
      out[name as 'measurement' | 'host_data'] = hexList(value, key, bytes);
    } else if (name === 'platform_info') {
      const bits = mapAt(value, key, PLATFORM_INFO_KEYS);
      const p: NonNullable<SnpReferenceValues['platform_info']> = {};
      for (const [bit, v] of Object.entries(bits))
        p[bit as SnpPlatformInfoBit] = scalarList(v, `${key}.${bit}`).map((text) => booleanValue(text, `${key}.${bit}`));
      out.platform_info = p;
    } else if (name === 'permit_provisional_firmware' || name === 'allow_missing_crl') {
      out[name] = booleanValue(single(value, key), key);
    } else if (name === 'min_build' || name === 'min_guest_svn') {
      out[name] = integer(single(value, key), key, name === 'min_build' ? 255 : 0xffffffff);
    } else if (name === 'min_launch_mit_vector' || name === 'min_current_mit_vector') {
      const text = single(value, key);
      if (!/^(?:0x[0-9a-fA-F]{1,16}|\d{1,20})$/.test(text) || BigInt(text) > 0xffffffffffffffffn)
        throw new ReferenceValuesError(key, `must be a 64-bit number, decimal or 0x-hex (the bits required), got ${JSON.stringify(text)}`);
      out[name] = BigInt(text);
    } else if (name === 'min_api_version') {
      const m = /^(\d{1,3})\.(\d{1,3})$/.exec(single(value, key));
      if (m === null || Number(m[1]) > 255 || Number(m[2]) > 255)
        throw new ReferenceValuesError(key, `must be MAJOR.MINOR, e.g. 1.55, got ${JSON.stringify(single(value, key))}`);
      out.min_api_version = { major: Number(m[1]), minor: Number(m[2]) };
    } else if (name === 'vmpl') {
      out.vmpl = scalarList(value, key).map((v, i) => integer(v, Array.isArray(value) ? `${key}[${i}]` : key, 3));
    } else if (name === 'min_tcb') {
      const tcb = mapAt(value, key, MIN_TCB_KEYS);
      const min: SnpMinTcb = {};
      for (const [part, v] of Object.entries(tcb)) min[part as keyof SnpMinTcb] = integer(single(v, `${key}.${part}`), `${key}.${part}`, 255);
      out.min_tcb = min;
    } else {
      const policy = mapAt(value, key, POLICY_KEYS);
      const p: NonNullable<SnpReferenceValues['policy']> = {};
      for (const [flag, v] of Object.entries(policy)) {
        const at = `${key}.${flag}`;
        const values = scalarList(v, at).map((text) => booleanValue(text, at));
        if (flag === 'debug') {
          if (values.some((b) => b)) throw new ReferenceValuesError(at, 'may only be false: a guest the host can debug has no confidential memory');
          p.debug = values as false[];
        } else {
          p[flag as 'migrate_ma' | 'smt' | SnpPolicyBit] = values;
        }
      }
      out.policy = p;
    }
  }
  return out;
}

function readSigil(node: Node): SigilReferenceValues {
  const map = mapAt(node, 'sigil', ['manifest_sha384', 'accept_loaded_keys']);
  const out: SigilReferenceValues = {};
  if (map.manifest_sha384 !== undefined) out.manifest_sha384 = hexList(map.manifest_sha384, 'sigil.manifest_sha384', 48);
  if (map.accept_loaded_keys !== undefined)
    out.accept_loaded_keys = booleanValue(single(map.accept_loaded_keys, 'sigil.accept_loaded_keys'), 'sigil.accept_loaded_keys');
  return out;
}

function readRelease(node: Node): ReleaseReferenceValues {
  const map = mapAt(node, 'release', ['min_version', 'max_validity_days']);
  const out: ReleaseReferenceValues = {};
  if (map.min_version !== undefined) {
    const version = single(map.min_version, 'release.min_version');
    if (!isReleaseVersion(version))
      throw new ReferenceValuesError('release.min_version', `must be a semantic version such as 1.2.0, got ${JSON.stringify(version)}`);
    out.min_version = version;
  }
  if (map.max_validity_days !== undefined) {
    const days = integer(single(map.max_validity_days, 'release.max_validity_days'), 'release.max_validity_days', 3650);
    if (days < 1) throw new ReferenceValuesError('release.max_validity_days', 'must be at least 1');
    out.max_validity_days = days;
  }
  return out;
}

function readGpu(node: Node, resolvePath: (path: string) => string): GpuReferenceValues {
  const map = mapAt(node, 'gpu', ['rims', 'ocsp', 'ocsp_allow_missing']);
  const out: GpuReferenceValues = {};
  if (map.rims !== undefined) out.rims = scalarList(map.rims, 'gpu.rims').map(resolvePath);
  if (map.ocsp !== undefined) out.ocsp = scalarList(map.ocsp, 'gpu.ocsp').map(resolvePath);
  if (map.ocsp_allow_missing !== undefined)
    out.ocsp_allow_missing = booleanValue(single(map.ocsp_allow_missing, 'gpu.ocsp_allow_missing'), 'gpu.ocsp_allow_missing');
  return out;
}

/**
 * Parses a reference-values file (YAML, or JSON, which is YAML). Every scalar is read as text first, so a hex
 * value such as `000000...` is never taken for a number. Unknown keys, malformed values and empty lists throw
 * a ReferenceValuesError naming the key. `resolvePath` turns a RIM path (relative to the file) into a usable one.
 */
export function parseReferenceValues(text: string, resolvePath: (path: string) => string = (p) => p): ReferenceValues {
  let doc: unknown;
  try {
    doc = parseYaml(text, { schema: 'failsafe' }) as unknown;
  } catch (err) {
    throw new ReferenceValuesError(null, `not YAML or JSON: ${(err as Error).message.split('\n')[0]}`);
  }
  if (doc === undefined || doc === null || doc === '') throw new ReferenceValuesError(null, 'the file is empty');
  const root = mapAt(doc as Node, null, ['release', 'sigil', 'tdx', 'snp', 'gpu']);
  const out: ReferenceValues = {};
  if (root.release !== undefined) out.release = readRelease(root.release);
  if (root.sigil !== undefined) out.sigil = readSigil(root.sigil);
  if (root.tdx !== undefined) out.tdx = readTdx(root.tdx);
  if (root.snp !== undefined) out.snp = readSnp(root.snp);
  if (root.gpu !== undefined) out.gpu = readGpu(root.gpu, resolvePath);
  return out;
}
