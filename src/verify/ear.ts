import { checkMark, verdictOf, type Check } from './check.ts';

/**
 * The verdict as an IETF RATS EAT Attestation Result (EAR, draft-ietf-rats-ear, JSON serialization), with
 * AR4SI trustworthiness claims. Unsigned: the caller signs it as a JWT if it hands it on. The mapping of
 * checks to claims is in docs/auditing.md, "Exporting the verdict as an EAR".
 */
export const EAR_PROFILE = 'tag:ietf.org,2026:rats/ear#04';

/** AR4SI trust tiers and their claim values. */
const TIER = { none: 0, affirming: 2, warning: 32, contraindicated: 96 } as const;
type Tier = keyof typeof TIER;

/**
 * Which checks speak to which AR4SI claim, in order: a check belongs to the first claim with a pattern it
 * matches. A pattern is a check name, or a prefix ending in `*`; `[n]` stands for any index (`gpu[n].*`).
 * docs/auditing.md, "Exporting the verdict as an EAR", prints this table and a test holds the two equal.
 */
export const EAR_CLAIMS: ReadonlyArray<readonly [claim: EarClaim, patterns: readonly string[]]> = [
  [
    'instance-identity',
    [
      'attestation.nonce',
      'attestation.signed_nonce',
      'attestation.report_data',
      'attestation.jwks',
      'attestation.tls_key',
      'attestation.hpke_key',
      'attestation.ohttp_key',
      'attestation.key_origin',
      'evidence.report_data',
      'binding.*',
      'snp.instance',
      'tdx.instance',
      'receipt.*',
      'model_receipt.*',
      'log.*',
      'live.*',
    ],
  ],
  [
    'executables',
    ['attestation.measurement', 'attestation.manifest', 'attestation.events', 'reference.*', 'release.*', 'eventlog.*', 'gpu[n].*', 'gpu.rim[n].*'],
  ],
  [
    'configuration',
    [
      'attestation.policy',
      'policy.model',
      'snp.debug',
      'snp.migrate_ma',
      'snp.smt',
      'snp.vmpl',
      'snp.reported_tcb',
      'snp.launch_tcb',
      'snp.guest_policy',
      'snp.platform_info',
      'tdx.debug',
      'tdx.td_attributes',
      'tdx.xfam',
      'tdx.mr*',
      'tdx.tee_tcb_svn',
      'tdx.tcb_status',
      'collateral.*',
    ],
  ],
  ['hardware', ['attestation.tee', 'attestation.document', 'snp.*', 'tdx.*', 'gpu.*']],
];

export type EarClaim = 'instance-identity' | 'executables' | 'configuration' | 'hardware';

function matcherOf(pattern: string): RegExp {
  const escaped = pattern
    .replace(/[.+?^${}()|\\]/g, '\\$&')
    .replace(/\[n\]/g, '\\[\\d+\\]')
    .replace(/\*$/, '.*');
  return new RegExp(`^${escaped}$`);
}

const MATCHERS = EAR_CLAIMS.map(([claim, patterns]) => [claim, patterns.map(matcherOf)] as const);

/** The AR4SI claim a check feeds, or undefined for a name the table does not know. */
export function earClaimOf(name: string): EarClaim | undefined {
  return MATCHERS.find(([, matchers]) => matchers.some((m) => m.test(name)))?.[0];
}

/** The tier of a group of checks: any failure contraindicates; anything unpinned says nothing; waivers warn. */
function tierOf(checks: readonly Check[]): Tier {
  const marks = checks.map(checkMark);
  if (marks.includes('FAIL')) return 'contraindicated';
  if (marks.includes('----')) return 'none';
  if (marks.includes('WAIVED')) return 'warning';
  return 'affirming';
}

export interface EarOptions {
  /** The verifier's identity: who built it, and which build. */
  verifier: { developer: string; build: string };
  /** The submodule name the appraisal is filed under, e.g. the service's origin. */
  submod: string;
  /** Seconds since the epoch; now by default. */
  iat?: number;
}

export interface Ear {
  eat_profile: string;
  iat: number;
  ear_verifier_id: { developer: string; build: string };
  submods: Record<string, { ear_status: Tier; ear_trustworthiness_vector: Record<string, number>; ear_appraisal_policy_ids: string[] }>;
}

/** The EAR of a list of checks: `ear_status` from the verdict (verified: affirming; with waivers: warning; not verified: contraindicated). */
export function toEar(checks: readonly Check[], options: EarOptions): Ear {
  const outcome = verdictOf(checks).outcome;
  const vector: Record<string, number> = {};
  for (const [claim] of EAR_CLAIMS) {
    // A check the table does not know feeds every claim, so a new check can lower the vector but never be ignored.
    const group = checks.filter((c) => {
      const of = earClaimOf(c.name);
      return of === claim || of === undefined;
    });
    if (group.length > 0) vector[claim] = TIER[tierOf(group)];
  }
  const status: Tier = outcome === 'verified' ? 'affirming' : outcome === 'verified-with-waivers' ? 'warning' : 'contraindicated';
  return {
    eat_profile: EAR_PROFILE,
    iat: options.iat ?? Math.floor(Date.now() / 1000),
    ear_verifier_id: options.verifier,
    submods: {
      [options.submod]: { ear_status: status, ear_trustworthiness_vector: vector, ear_appraisal_policy_ids: ['sigil:docs/auditing.md#what-a-verdict-means'] },
    },
  };
}
