import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { didYouMean, knownKeysAt } from '../../protocol/known-keys.ts';
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

/** A single value stands for a list of one; a list of nothing is refused, as it would accept nothing. */
function oneOrMore<T extends z.ZodType>(item: T) {
  return z.preprocess((node) => (Array.isArray(node) ? node : [node]), z.array(item).min(1, 'an empty list accepts nothing; leave the key out to not pin it'));
}

/** A minimum or a switch: one value (a list of one is read as that value). */
function one<T extends z.ZodType>(item: T) {
  return oneOrMore(item)
    .refine((list) => list.length === 1, 'is a minimum: give one value, not a list')
    .transform((list) => list[0] as z.output<T>);
}

/** Every scalar of the file, read as text (YAML's failsafe schema) and trimmed; `what` and `example` explain a list or mapping given instead. */
function scalar(what: string, example: string) {
  return z
    .string({ error: `must be ${what}, not a list or mapping, e.g. ${example}` })
    .refine((text) => text !== '', 'has no value')
    .transform((text) => text.trim());
}

const got = (issue: { input?: unknown }) => `got ${JSON.stringify(issue.input)}`;

function hex(bytes: number) {
  const digits = `${bytes * 2} hex digits (${bytes} bytes)`;
  return scalar(digits, `[<${bytes * 2} hex digits>, ...]`)
    .refine((text) => /^[0-9a-fA-F]*$/.test(text) && text.length === bytes * 2, { error: (issue) => `must be ${digits}, ${got(issue)}` })
    .transform((text) => text.toLowerCase());
}

function integer(max: number, example: string) {
  return scalar(`an integer from 0 to ${max}`, example)
    .refine((text) => /^\d+$/.test(text) && Number(text) <= max, { error: (issue) => `must be an integer from 0 to ${max}, ${got(issue)}` })
    .transform(Number);
}

const booleanValue = scalar('true or false', 'false')
  .refine((text) => text === 'true' || text === 'false', { error: (issue) => `must be true or false, ${got(issue)}` })
  .transform((text) => text === 'true');

const tcbStatus = scalar('an Intel TCB status', '[UpToDate, SWHardeningNeeded]').refine(
  (text): text is TcbStatus => (TCB_STATUSES as readonly string[]).includes(text),
  { error: (issue) => `unknown TCB status ${JSON.stringify(issue.input)}${didYouMean(String(issue.input), TCB_STATUSES)} (known: ${TCB_STATUSES.join(', ')})` },
);

const mitigationVector = scalar('a 64-bit number', '0x3').refine(
  (text) => /^(?:0x[0-9a-fA-F]{1,16}|\d{1,20})$/.test(text) && BigInt(text) <= 0xffffffffffffffffn,
  { error: (issue) => `must be a 64-bit number, decimal or 0x-hex (the bits required), ${got(issue)}` },
);

const API_VERSION = /^(\d{1,3})\.(\d{1,3})$/;
const apiVersion = scalar('MAJOR.MINOR', '1.55')
  .refine(
    (text) => {
      const m = API_VERSION.exec(text);
      return m !== null && Number(m[1]) <= 255 && Number(m[2]) <= 255;
    },
    { error: (issue) => `must be MAJOR.MINOR, e.g. 1.55, ${got(issue)}` },
  )
  .transform((text) => {
    const [, major, minor] = API_VERSION.exec(text)!;
    return { major: Number(major), minor: Number(minor) };
  });

/** A strict mapping: an unknown key is refused (with the nearest known one), a value given instead is shown an example. */
function section<S extends z.ZodRawShape>(shape: S, example: string) {
  return z.strictObject(shape, { error: (issue) => (issue.code === 'invalid_type' ? `must be a mapping of keys to values, e.g. ${example}` : undefined) });
}

const hexKeys = <K extends string>(lengths: Record<K, number>) =>
  Object.fromEntries(Object.entries<number>(lengths).map(([key, bytes]) => [key, oneOrMore(hex(bytes)).optional()])) as Record<
    K,
    z.ZodOptional<ReturnType<typeof oneOrMore<ReturnType<typeof hex>>>>
  >;

const booleanKeys = <K extends string>(names: readonly K[]) =>
  Object.fromEntries(names.map((name) => [name, oneOrMore(booleanValue).optional()])) as Record<
    K,
    z.ZodOptional<ReturnType<typeof oneOrMore<typeof booleanValue>>>
  >;

const tdxSchema = section(
  {
    ...hexKeys({
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
    }),
    min_tee_tcb_svn: one(hex(16)).optional(),
    tcb_status: oneOrMore(tcbStatus).optional(),
    min_qe_svn: one(integer(0xffff, '8')).optional(),
    min_pce_svn: one(integer(0xffff, '13')).optional(),
    min_tcb_evaluation_data_number: one(integer(0xffffffff, '17')).optional(),
  },
  '{mrtd: <96 hex digits>}',
);

const snpSchema = section(
  {
    measurement: oneOrMore(hex(48)).optional(),
    host_data: oneOrMore(hex(32)).optional(),
    vmpl: oneOrMore(integer(3, '0')).optional(),
    min_tcb: section(
      {
        bootloader: one(integer(255, '3')).optional(),
        tee: one(integer(255, '0')).optional(),
        snp: one(integer(255, '8')).optional(),
        microcode: one(integer(255, '115')).optional(),
        fmc: one(integer(255, '0')).optional(),
      },
      '{bootloader: 3, snp: 8, microcode: 115}',
    ).optional(),
    policy: section(
      {
        debug: oneOrMore(booleanValue)
          .refine((values) => values.every((value) => !value), {
            error: 'may only be false: a guest the host can debug has no confidential memory',
            when: ({ issues }) => issues.length === 0, // a value that is not a boolean is reported as that, not as true
          })
          .transform((values) => values as false[])
          .optional(),
        ...booleanKeys(['migrate_ma', 'smt', ...(Object.keys(SNP_POLICY_BITS) as SnpPolicyBit[])]),
      },
      '{debug: false, smt: [true, false]}',
    ).optional(),
    platform_info: section(booleanKeys(Object.keys(SNP_PLATFORM_INFO_BITS) as SnpPlatformInfoBit[]), '{smt_enabled: false}').optional(),
    permit_provisional_firmware: one(booleanValue).optional(),
    allow_missing_crl: one(booleanValue).optional(),
    min_launch_mit_vector: one(mitigationVector).transform(BigInt).optional(),
    min_current_mit_vector: one(mitigationVector).transform(BigInt).optional(),
    min_build: one(integer(255, '21')).optional(),
    min_api_version: one(apiVersion).optional(),
    min_guest_svn: one(integer(0xffffffff, '1')).optional(),
    ...hexKeys({
      family_id: 16,
      image_id: 16,
      id_key_digest: 48,
      author_key_digest: 48,
      report_id: 32,
      chip_id: 64,
      report_id_ma: 32,
    }),
  },
  '{measurement: <96 hex digits>}',
);

const referenceValuesSchema = section(
  {
    release: section(
      {
        min_version: one(
          scalar('a semantic version', '1.2.0').refine(isReleaseVersion, {
            error: (issue) => `must be a semantic version such as 1.2.0, ${got(issue)}`,
          }),
        ).optional(),
        max_validity_days: one(integer(3650, '30').refine((days) => days >= 1, 'must be at least 1')).optional(),
      },
      '{min_version: 1.2.0}',
    ).optional(),
    sigil: section(
      { manifest_sha384: oneOrMore(hex(48)).optional(), accept_loaded_keys: one(booleanValue).optional() },
      '{manifest_sha384: <96 hex digits>}',
    ).optional(),
    tdx: tdxSchema.optional(),
    snp: snpSchema.optional(),
    gpu: section(
      {
        rims: oneOrMore(scalar('a path', '[rims/driver.swidtag]')).optional(),
        ocsp: oneOrMore(scalar('a path', '[ocsp/device.der]')).optional(),
        ocsp_allow_missing: one(booleanValue).optional(),
      },
      '{rims: [rims/driver.swidtag]}',
    ).optional(),
  },
  '{tdx: {mrtd: <96 hex digits>}}',
) satisfies z.ZodType<ReferenceValues>;

/** `tdx.mrtd[1]`: keys joined by dots, list positions in brackets; the position of a single value (a list of one) left out. */
function keyOf(path: readonly PropertyKey[], doc: unknown): string {
  let key = '';
  let node = doc;
  for (const step of path) {
    if (typeof step === 'number') {
      if (!Array.isArray(node)) continue;
      key += `[${step}]`;
    } else {
      key += key === '' ? String(step) : `.${String(step)}`;
    }
    node = (node as Record<PropertyKey, unknown> | undefined)?.[step];
  }
  return key;
}

/** Each problem as the key it is at and what is wrong there; an unknown key is named with the nearest known one. */
function describeIssues(issues: readonly z.core.$ZodIssue[], doc: unknown): { key: string | null; problem: string }[] {
  return issues.flatMap((issue) => {
    const at = keyOf(issue.path, doc);
    if (issue.code !== 'unrecognized_keys') return [{ key: at === '' ? null : at, problem: issue.message }];
    const known = knownKeysAt(referenceValuesSchema, issue.path);
    const where = at === '' ? 'at the top level' : `under ${at}`;
    return issue.keys.map((name) => {
      const hint = didYouMean(name, known);
      return { key: at === '' ? name : `${at}.${name}`, problem: `unknown key${hint === '' ? ` (allowed ${where}: ${known.join(', ')})` : hint}` };
    });
  });
}

/**
 * Parses a reference-values file (YAML, or JSON, which is YAML) against its schema. Every scalar is read as text
 * first, so a hex value such as `000000...` is never taken for a number. Unknown keys, malformed values and empty
 * lists throw a ReferenceValuesError naming the first offending key, with every problem found, one a line.
 * `resolvePath` turns a RIM or OCSP path (relative to the file) into a usable one.
 */
export function parseReferenceValues(text: string, resolvePath: (path: string) => string = (p) => p): ReferenceValues {
  let doc: unknown;
  try {
    doc = parseYaml(text, { schema: 'failsafe' }) as unknown;
  } catch (err) {
    throw new ReferenceValuesError(null, `not YAML or JSON: ${(err as Error).message.split('\n')[0]}`);
  }
  if (doc === undefined || doc === null || doc === '') throw new ReferenceValuesError(null, 'the file is empty');
  const result = referenceValuesSchema.safeParse(doc);
  if (!result.success) {
    const [first, ...rest] = describeIssues(result.error.issues, doc);
    const more = rest.map(({ key, problem }) => `\n${key === null ? '' : `${key}: `}${problem}`).join('');
    throw new ReferenceValuesError(first!.key, first!.problem + more);
  }
  const { gpu } = result.data;
  if (gpu === undefined) return result.data;
  return {
    ...result.data,
    gpu: { ...gpu, rims: gpu.rims?.map(resolvePath), ocsp: gpu.ocsp?.map(resolvePath) },
  };
}
