import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Dispatcher } from 'undici';
import type { TrustRoots } from '../verify/attestation.ts';
import type { GpuTrustRoots } from '../verify/gpu/index.ts';
import type { CollateralBundle } from '../verify/evidence/collateral/bundle.ts';
import type { ReferenceValues } from '../verify/reference/reference-values.ts';
import { fail, verdictOf, type Check, type Verdict } from '../verify/check.ts';
import { fetchServiceEvidence } from '../verify/service.ts';
import { pinnedAgent, SpkiPin } from '../verify/tls-pin.ts';
import { ReleaseError } from '../verify/release/errors.ts';
import { verifyReleaseReference, type ReleaseReference } from '../verify/release/release-reference.ts';
import type { ReleaseTrust } from '../verify/release/trust.ts';
import { VerifyError } from '../verify/errors.ts';
import { collateralExpiry } from './collateral-expiry.ts';
import { verifyService, type ServiceEvidence, type ServiceExpectations, type ServiceFacts, type Waivers } from '../verify/verify-service.ts';

export interface AttestOptions {
  baseURL: string;
  reference?: ReferenceValues | undefined;
  waive?: Waivers | undefined;
  roots?: TrustRoots | undefined;
  /** NVIDIA's device identity and RIM roots; the built-in ones unless a test brings its own. */
  gpuRoots?: GpuTrustRoots | undefined;
  ca?: string | undefined;
  /**
   * A signed release manifest (docs/release.md) whose values join `reference`, verified again at each
   * attestation (it may expire); its `release.*` checks join the others and any failure refuses the service.
   */
  release?: { bundle: Uint8Array; trust: ReleaseTrust } | undefined;
  /**
   * A collateral bundle, read (`readCollateralDirectory`, as `sigil collateral fetch` writes it): AMD's CRL is checked
   * as snp.crl instead of the certificate table's, Intel's collateral gives the TDX platform's TCB status, and
   * NVIDIA's RIMs and OCSP answers join those the reference values name; the same use `sigil verify --collateral` makes.
   */
  collateral?: CollateralBundle | undefined;
  /** The nonce to send; default 32 fresh random bytes. A nonce the caller chose proves freshness only if nobody else knew it. */
  nonce?: Uint8Array | undefined;
  /**
   * Ask for a fresh hardware report binding the nonce. Default false: the start evidence and the nonce signed by the
   * receipt key it binds (docs/attestation.md, "Freshness from a signed nonce"), which the service answers cheaply.
   */
  freshReport?: boolean | undefined;
  /**
   * The caller's API key, sent with the nonce's request only, so the service counts it against this key's allowance
   * rather than the address's (behind a load balancer every client shares one address).
   */
  apiKey?: string | undefined;
  /** The clock that dates the verdict (`at`); the real one unless a test brings its own. */
  now?: (() => Date) | undefined;
  /**
   * What carries the fetches instead of a TLS connection pinned to the key it presents: an Oblivious HTTP relay's
   * dispatcher (`ohttpRelay`). No TLS key is seen then; the caller ties the channel to the attestation itself.
   */
  dispatcher?: Dispatcher | undefined;
}

/** A verified attestation: what every later request and receipt is held to. */
export interface Attested extends ServiceFacts {
  checks: Check[];
  verdict: Verdict;
  at: Date;
  /** What was fetched and the nonce it answers: enough for `sigil verify --audit` to verify it again offline. */
  evidence: ServiceEvidence;
  nonce: Uint8Array;
  /** The earliest `nextUpdate` of the collateral the verdict used (CRLs, TCB info, OCSP answers), when known: it is renewed before then. */
  expiresAt?: Date;
  /** Whether the hardware reports answer the client's own nonce (`freshReport`), or freshness rests on the start evidence and a signed nonce. */
  freshness: 'fresh report' | 'start evidence and signed nonce';
}

/** The RIM and OCSP files the reference values name, read; one that cannot be read fails `gpu.rims` or `gpu.ocsp` by name. */
async function readRims(reference: ReferenceValues | undefined): Promise<{ rims: string[]; ocsp: Array<{ label: string; der: Uint8Array }>; checks: Check[] }> {
  const rims: string[] = [];
  const checks: Check[] = [];
  for (const path of reference?.gpu?.rims ?? []) {
    try {
      rims.push(await readFile(path, 'utf8'));
    } catch (err) {
      checks.push(
        fail(
          'gpu.rims',
          `the RIM ${path} named by the reference values cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}), so the GPU measurements cannot be compared with it`,
        ),
      );
    }
  }
  const ocsp: Array<{ label: string; der: Uint8Array }> = [];
  for (const path of reference?.gpu?.ocsp ?? []) {
    try {
      ocsp.push({ label: path, der: new Uint8Array(await readFile(path)) });
    } catch (err) {
      checks.push(
        fail(
          'gpu.ocsp',
          `the OCSP response ${path} named by the reference values cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}), so the certificates it covers count as unchecked`,
        ),
      );
    }
  }
  return { rims, ocsp, checks };
}

/** The release checked now, its values with the caller's added: a key or trust root that cannot be used at all is an error, not a verdict. */
function releaseReference(release: NonNullable<AttestOptions['release']>, own: AttestOptions['reference']): ReleaseReference {
  try {
    return verifyReleaseReference(release.bundle, release.trust, own, new Date());
  } catch (err) {
    if (!(err instanceof ReleaseError)) throw err;
    throw new VerifyError('ERR_VERIFY_ATTESTATION', `the release manifest's trust (key or Sigstore trusted root) could not be used: ${err.message}`);
  }
}

/**
 * Fetches the attestation with a fresh nonce over a connection pinned to the key it presents, and verifies
 * it with the one core (`verifyService`). The caller goes on only when `verdict.outcome` is not not-verified.
 */
export async function attest(options: AttestOptions): Promise<Attested> {
  const release = options.release === undefined ? undefined : releaseReference(options.release, options.reference);
  const reference = release === undefined ? options.reference : release.values;
  const nonce = options.nonce ?? randomBytes(32);
  const pin = new SpkiPin();
  const dispatcher = options.dispatcher ?? pinnedAgent(pin, { ca: options.ca });
  try {
    const headers: Record<string, string> = options.apiKey === undefined ? {} : { authorization: `Bearer ${options.apiKey}` };
    const evidence = await fetchServiceEvidence(options.baseURL, nonce, pin, dispatcher, options.freshReport === true ? 'report' : 'signature', headers);
    const rims = await readRims(reference);
    evidence.rims = rims.rims;
    evidence.ocsp = rims.ocsp;
    if (options.collateral !== undefined) evidence.collateral = options.collateral;
    const expect: ServiceExpectations = { nonce };
    if (reference !== undefined) expect.reference = reference;
    if (options.waive !== undefined) expect.waive = options.waive;
    if (options.roots !== undefined) expect.roots = options.roots;
    if (options.gpuRoots !== undefined) expect.gpuRoots = options.gpuRoots;
    const result = await verifyService(evidence, expect);
    const checks = [...(release?.checks ?? []), ...rims.checks, ...result.checks];
    const freshness = options.freshReport === true ? 'fresh report' : 'start evidence and signed nonce';
    const at = options.now?.() ?? new Date();
    const attested: Attested = { ...result.facts, checks, verdict: verdictOf(checks), at, evidence, nonce, freshness };
    const expiresAt = collateralExpiry(evidence, at);
    if (expiresAt !== undefined) attested.expiresAt = expiresAt;
    return attested;
  } finally {
    if (options.dispatcher === undefined) await dispatcher.close();
  }
}
