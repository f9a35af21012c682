import { parse as parseYaml } from 'yaml';
import * as z from 'zod/mini';
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
function oneOrMore<T extends z.ZodMiniType>(item: T) {
  return z.pipe(
    z.transform((node: unknown) => (Array.isArray(node) ? (node as unknown[]) : [node])),
    z.array(item).check(z.minLength(1, 'an empty list accepts nothing; leave the key out to not pin it')),
  );
}

/** A minimum or a switch: one value (a list of one is read as that value). */
function one<T extends z.ZodMiniType>(item: T) {
  return z.pipe(
    oneOrMore(item).check(z.refine((list) => list.length === 1, 'is a minimum: give one value, not a list')),
    z.transform((list: z.output<T>[]) => list[0]!),
  );
}

/** Every scalar of the file, read as text (YAML's failsafe schema) and trimmed; `what` and `example` explain a list or mapping given instead. */
function scalar(what: string, example: string) {
  return z.string({ error: `must be ${what}, not a list or mapping, e.g. ${example}` }).check(
    z.refine((text) => text !== '', { error: 'has no value', abort: true }),
    z.trim(),
  );
}

const got = (issue: { input?: unknown }) => `got ${JSON.stringify(issue.input)}`;

/** The value as the auditor wrote it (trimmed) must pass `test`; `problem` says what it must be instead. */
function valid(test: (text: string) => boolean, problem: string) {
  return z.refine<string>(test, { error: (issue) => `${problem}, ${got(issue)}` });
}

function hex(bytes: number) {
  const digits = `${bytes * 2} hex digits (${bytes} bytes)`;
  return scalar(digits, `[<${bytes * 2} hex digits>, ...]`).check(
    valid((text) => /^[0-9a-fA-F]*$/.test(text) && text.length === bytes * 2, `must be ${digits}`),
    z.toLowerCase(),
  );
}

function integer(max: number, example: string) {
  return z.pipe(
    scalar(`an integer from 0 to ${max}`, example).check(valid((text) => /^\d+$/.test(text) && Number(text) <= max, `must be an integer from 0 to ${max}`)),
    z.transform(Number),
  );
}

const booleanValue = z.pipe(
  scalar('true or false', 'false').check(valid((text) => text === 'true' || text === 'false', 'must be true or false')),
  z.transform((text: string) => text === 'true'),
);

const tcbStatus = z.pipe(
  scalar('an Intel TCB status', '[UpToDate, SWHardeningNeeded]').check(
    z.refine((text) => (TCB_STATUSES as readonly string[]).includes(text), {
      error: (issue) => `unknown TCB status ${JSON.stringify(issue.input)}${didYouMean(String(issue.input), TCB_STATUSES)} (known: ${TCB_STATUSES.join(', ')})`,
    }),
  ),
  z.transform((text: string) => text as TcbStatus),
);

const mitigationVector = z.pipe(
  scalar('a 64-bit number', '0x3').check(
    valid(
      (text) => /^(?:0x[0-9a-fA-F]{1,16}|\d{1,20})$/.test(text) && BigInt(text) <= 0xffffffffffffffffn,
      'must be a 64-bit number, decimal or 0x-hex (the bits required)',
    ),
  ),
  z.transform((text: string) => BigInt(text)),
);

const API_VERSION = /^(\d{1,3})\.(\d{1,3})$/;
const apiVersion = z.pipe(
  scalar('MAJOR.MINOR', '1.55').check(
    valid((text) => {
      const m = API_VERSION.exec(text);
      return m !== null && Number(m[1]) <= 255 && Number(m[2]) <= 255;
    }, 'must be MAJOR.MINOR, e.g. 1.55'),
  ),
  z.transform((text: string) => {
    const [, major, minor] = API_VERSION.exec(text)!;
    return { major: Number(major), minor: Number(minor) };
  }),
);

const releaseVersion = scalar('a semantic version', '1.2.0').check(valid((text) => isReleaseVersion(text), 'must be a semantic version such as 1.2.0'));

const validityDays = z.pipe(integer(3650, '30'), z.number().check(z.refine((days) => days >= 1, 'must be at least 1')));

/** A strict mapping: an unknown key is refused (with the nearest known one), a value given instead is shown an example. */
function section<S extends z.core.$ZodLooseShape>(shape: S, example: string) {
  return z.strictObject(shape, { error: (issue) => (issue.code === 'invalid_type' ? `must be a mapping of keys to values, e.g. ${example}` : undefined) });
}

const hexList = (bytes: number) => z.optional(oneOrMore(hex(bytes)));
const hexKeys = <K extends string>(lengths: Record<K, number>) =>
  Object.fromEntries(Object.entries<number>(lengths).map(([key, bytes]) => [key, hexList(bytes)])) as Record<K, ReturnType<typeof hexList>>;

const booleanList = () => z.optional(oneOrMore(booleanValue));
const booleanKeys = <K extends string>(names: readonly K[]) =>
  Object.fromEntries(names.map((name) => [name, booleanList()])) as Record<K, ReturnType<typeof booleanList>>;

/** DEBUG: a list of booleans that may only hold false. */
const debugPolicy = z.pipe(
  oneOrMore(booleanValue).check(
    z.refine((values) => values.every((value) => !value), {
      error: 'may only be false: a guest the host can debug has no confidential memory',
      when: ({ issues }) => issues.length === 0, // a value that is not a boolean is reported as that, not as true
    }),
  ),
  z.transform((values: boolean[]) => values as false[]),
);

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
    min_tee_tcb_svn: z.optional(one(hex(16))),
    tcb_status: z.optional(oneOrMore(tcbStatus)),
    min_qe_svn: z.optional(one(integer(0xffff, '8'))),
    min_pce_svn: z.optional(one(integer(0xffff, '13'))),
    min_tcb_evaluation_data_number: z.optional(one(integer(0xffffffff, '17'))),
  },
  '{mrtd: <96 hex digits>}',
);

const snpSchema = section(
  {
    measurement: hexList(48),
    host_data: hexList(32),
    vmpl: z.optional(oneOrMore(integer(3, '0'))),
    min_tcb: z.optional(
      section(
        {
          bootloader: z.optional(one(integer(255, '3'))),
          tee: z.optional(one(integer(255, '0'))),
          snp: z.optional(one(integer(255, '8'))),
          microcode: z.optional(one(integer(255, '115'))),
          fmc: z.optional(one(integer(255, '0'))),
        },
        '{bootloader: 3, snp: 8, microcode: 115}',
      ),
    ),
    policy: z.optional(
      section(
        { debug: z.optional(debugPolicy), ...booleanKeys(['migrate_ma', 'smt', ...(Object.keys(SNP_POLICY_BITS) as SnpPolicyBit[])]) },
        '{debug: false, smt: [true, false]}',
      ),
    ),
    platform_info: z.optional(section(booleanKeys(Object.keys(SNP_PLATFORM_INFO_BITS) as SnpPlatformInfoBit[]), '{smt_enabled: false}')),
    permit_provisional_firmware: z.optional(one(booleanValue)),
    allow_missing_crl: z.optional(one(booleanValue)),
    min_launch_mit_vector: z.optional(one(mitigationVector)),
    min_current_mit_vector: z.optional(one(mitigationVector)),
    min_build: z.optional(one(integer(255, '21'))),
    min_api_version: z.optional(one(apiVersion)),
    min_guest_svn: z.optional(one(integer(0xffffffff, '1'))),
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
    release: z.optional(section({ min_version: z.optional(one(releaseVersion)), max_validity_days: z.optional(one(validityDays)) }, '{min_version: 1.2.0}')),
    sigil: z.optional(section({ manifest_sha384: hexList(48), accept_loaded_keys: z.optional(one(booleanValue)) }, '{manifest_sha384: <96 hex digits>}')),
    tdx: z.optional(tdxSchema),
    snp: z.optional(snpSchema),
    gpu: z.optional(
      section(
        {
          rims: z.optional(oneOrMore(scalar('a path', '[rims/driver.swidtag]'))),
          ocsp: z.optional(oneOrMore(scalar('a path', '[ocsp/device.der]'))),
          ocsp_allow_missing: z.optional(one(booleanValue)),
        },
        '{rims: [rims/driver.swidtag]}',
      ),
    ),
  },
  '{tdx: {mrtd: <96 hex digits>}}',
) satisfies z.ZodMiniType<ReferenceValues>;

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
