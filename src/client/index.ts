import { readFile } from 'node:fs/promises';
import type { Dispatcher } from 'undici';
import { brandHeaders } from '../protocol/brand-headers.ts';
import type { TrustRoots } from '../verify/attestation.ts';
import { readCollateralDirectory, type CollateralBundle } from '../verify/evidence/collateral/bundle.ts';
import type { GpuTrustRoots } from '../verify/gpu/index.ts';
import { readReferenceValues } from '../verify/reference/load.ts';
import type { ReferenceValues } from '../verify/reference/reference-values.ts';
import { withReleaseValues } from '../verify/release/reference-from-release.ts';
import type { ReleaseTrust } from '../verify/release/trust.ts';
import type { InclusionVerdict } from '../verify/tlog/receipt-inclusion.ts';
import { verdictOf } from '../verify/check.ts';
import type { Waivers } from '../verify/verify-service.ts';
import { attest, type Attested } from './attest.ts';
import { AttestationError, failedSummary } from './attestation-error.ts';
import { acceptingOptionsNote } from './check-remedies.ts';
import { ObliviousDispatcher } from './ohttp-dispatcher.ts';
import { fetchGatewayKeys } from './ohttp-fetch.ts';
import { boundGatewayKeys, relayedChecks, sealingKeyOf } from './ohttp-key-check.ts';
import type { Exchange, ReceiptResult } from './receipts.ts';
import { AttestedSession, DEFAULT_REATTEST_EVERY_MS, type Renewal } from './session.ts';
import { attestedCatalogue } from './steps/attested-catalogue.ts';
import { InclusionCheck } from './steps/check-inclusion.ts';
import { prepare } from './steps/prepare.ts';
import { sendClear, sendSealed } from './steps/seal.ts';
import type { ClientContext } from './steps/stage.ts';
import { verifyReceipt } from './steps/verify-receipt.ts';

export type { Attested } from './attest.ts';
export type { ReferenceValues } from '../verify/reference/reference-values.ts';
export type { Exchange, ReceiptResult } from './receipts.ts';
export type { ReleaseTrust } from '../verify/release/trust.ts';
export type { CollateralBundle } from '../verify/evidence/collateral/bundle.ts';
export type { InclusionVerdict } from '../verify/tlog/receipt-inclusion.ts';
export { AttestationError } from './attestation-error.ts';
export { UNVERIFIED_HEADER } from './steps/unverified.ts';
export { SOURCE_HEADER } from './steps/attested-catalogue.ts';
export { DEFAULT_REATTEST_EVERY_MS, type Renewal } from './session.ts';
export { createObliviousFetch, fetchGatewayKeys, ObliviousRelayError, type ObliviousFetchOptions } from './ohttp-fetch.ts';

export interface AttestedFetchOptions {
  /** The service, e.g. `https://inference.example.com/v1` (the OpenAI SDK's baseURL). */
  baseURL: string;
  /** Reference values (docs/auditing.md) as an object, or the path of a YAML or JSON file holding them. */
  reference?: ReferenceValues | string;
  /**
   * A signed release manifest (docs/release.md) whose values are reference values: its bytes or the path of the
   * bundle, and whom it must come from (`{ kind: 'key', publicKey }` or `{ kind: 'sigstore', identity, issuer, trustedRoot? }`).
   * It is verified offline at every attestation; a failed `release.*` check refuses the service like any other.
   * `reference` may come too, for what a release does not state (machine allow-lists, TCB floors, policy).
   */
  release?: { bundle: Uint8Array | string; trust: ReleaseTrust };
  /** Accept a development service with `tee: "none"`, over plain HTTP if so reached (nothing is attested then). Default false. */
  allowNoTee?: boolean;
  /**
   * Ask the service for a fresh hardware report at each attestation. Default false: the start evidence and our nonce signed
   * by the receipt key it binds (`attestation.signed_nonce`; docs/attestation.md, "Freshness from a signed nonce").
   */
  freshReport?: boolean;
  /**
   * The API key the requests will carry (as given to the OpenAI SDK), sent also with each attestation's nonce so the
   * service spends this key's allowance of attestations, not the one its address shares with everyone behind the same
   * load balancer. It goes over the connection being attested, before the verdict: leave it out to send nothing first.
   */
  apiKey?: string;
  /**
   * Send prompts to a genuine enclave whose code nobody pinned: without `reference`, the service could be running
   * any code at all, and the client refuses to send anything unless this is true. Default false.
   */
  allowUnpinnedCode?: boolean;
  /** The brand word in the service's header names (`X-<Brand>-Receipt`); default `Service`. */
  brand?: string;
  /** Called with each response's receipt verdict. */
  onReceipt?: (result: ReceiptResult) => void;
  /**
   * Called with each receipt verdict, the exchange it was verified over (the exact bytes each way and the nonce) and the
   * attestation it was held to: what an audit trail keeps (`sigil connect --audit-dir`). The bytes are the app's prompts and answers.
   */
  onExchange?: (exchange: Exchange, result: ReceiptResult, attested: Attested) => void;
  /** `throw` (default): a response whose receipt fails is an error (for a stream, at its end). `report`: only recorded. */
  onInvalidReceipt?: 'throw' | 'report';
  /**
   * Check that the service's transparency log holds every receipt received (docs/log.md, "Verifying"), when its attestation
   * binds one: default true. The response is not held back; each verdict settles `ReceiptResult.inclusion` and is given to
   * `onInclusion`.
   */
  checkLogInclusion?: boolean;
  /**
   * Hold each JSON answer until the log proves it holds the answer's receipt (up to the log's maximum merge delay), and
   * refuse it (`ERR_VERIFY_RECEIPT`, the `log.*` check named) otherwise. Default false: answers are not held back.
   * Streams are not held: their receipt comes at their end, after the content.
   */
  requireInclusion?: boolean;
  /**
   * The largest answer held for its receipt check, in bytes: a JSON body is read whole before it is handed over, and a
   * stream's bytes are kept until its receipt at the end. Beyond it the answer fails with `ERR_READ_TOO_LARGE`.
   * Default `DEFAULT_MAX_ANSWER_BYTES` (64 MiB).
   */
  maxAnswerBytes?: number;
  /**
   * Called with each response's inclusion verdict. Without it, a failed one is emitted as a process warning
   * (`SIGIL_LOG_INCLUSION`): a receipt missing from the log, or a log that forked, is never silent.
   */
  onInclusion?: (verdict: InclusionVerdict, result: ReceiptResult) => void;
  /**
   * A file keeping the largest checkpoint seen of each log across runs (the format of `sigil log --state`); without it the
   * client keeps them in memory, so each checkpoint must extend the last one this client saw.
   */
  logStateFile?: string;
  /**
   * A collateral bundle: the directory `sigil collateral fetch` wrote (read once, here), or its contents already read
   * (`readCollateralDirectory`). It is used as `sigil verify --collateral` uses it (docs/auditing.md, section 3): on a
   * real SEV-SNP host whose certificate table carries no CRL, AMD's CRL from the bundle is what lets snp.crl pass.
   */
  collateral?: string | CollateralBundle;
  /** AMD and Intel roots; the built-in ones unless a test brings its own. */
  roots?: TrustRoots;
  /** NVIDIA's device identity and RIM roots for GPU evidence; the built-in ones unless a test brings its own. */
  gpuRoots?: GpuTrustRoots;
  /**
   * Extra CA certificates (PEM) for TLS that does not end in the enclave (a load balancer in front of a
   * service with encrypted bodies); TLS that ends in the enclave is pinned to the attested key instead.
   */
  ca?: string;
  /**
   * The longest a verdict is trusted, in milliseconds: the service is attested again at least this often (and sooner when
   * collateral the verdict used expires, or a key changes); requests wait on a re-attestation in flight. Default one hour
   * (`DEFAULT_REATTEST_EVERY_MS`; docs/tls.md, "Re-attestation"). A re-attestation that fails refuses every request until one succeeds.
   */
  reattestEvery?: number;
  /** The clock verdicts age by; the real one unless a test brings its own. */
  now?: () => Date;
  /**
   * An Oblivious HTTP relay's URL (docs/ohttp.md, "Clients"): every request this client makes (the attestation and its
   * documents, the log's, re-attestations, the app's) goes through it, sealed to the gateway key the attestation binds,
   * so the service never sees this client's address. `ca` does not apply: the service is never contacted directly.
   */
  ohttpRelay?: string;
}

/** A `fetch` for one attested service; the OpenAI SDK takes it as is (`new OpenAI({ baseURL, apiKey, fetch })`). */
export interface AttestedFetch {
  (input: string | URL | Request, init?: RequestInit): Promise<Response>;
  /** The attestation currently trusted: its checks and what it vouches for. */
  readonly attestation: Attested;
  /** The most recent receipt verdicts, newest last (at most 100). */
  readonly receipts: readonly ReceiptResult[];
  /** The current verdict's age and renewal. */
  readonly renewal: Renewal;
  /**
   * Checks that the attested service's transparency log holds a receipt (a compact JWS), at `index` if known, else found by
   * its receipt id; waits for its batch up to the log's maximum merge delay. Never rejects: a failure is `ok: false`.
   */
  checkInclusion(receipt: string, index?: number): Promise<InclusionVerdict>;
  /** Closes the pinned connections; inclusion checks still waiting end with a failed verdict that says so. */
  close(): Promise<void>;
}

const KEPT_RECEIPTS = 100;
/** 64 MiB: far above any completion or embedding batch, far below what would hurt the process holding it. */
export const DEFAULT_MAX_ANSWER_BYTES = 64 * 1024 * 1024;

/** The reference values, release and collateral the options name, read once; a release that cannot join the reference is a TypeError. */
async function readInputs(options: AttestedFetchOptions) {
  const reference = typeof options.reference === 'string' ? await readReferenceValues(options.reference) : options.reference;
  if (options.release !== undefined && reference !== undefined) {
    try {
      withReleaseValues(reference, undefined);
    } catch (err) {
      throw new TypeError((err as Error).message, { cause: err });
    }
  }
  const bundle =
    options.release === undefined ? undefined : typeof options.release.bundle === 'string' ? await readFile(options.release.bundle) : options.release.bundle;
  const release = bundle === undefined ? undefined : { bundle, trust: options.release!.trust };
  const collateral = typeof options.collateral === 'string' ? await readCollateralDirectory(options.collateral) : options.collateral;
  return { reference, release, collateral };
}

/** Fetches the attestation and verifies it, over `channel` when given (a relay's) and else over TLS pinned to the key it presents. */
async function attestOnce(
  options: AttestedFetchOptions,
  inputs: Awaited<ReturnType<typeof readInputs>>,
  channel: { dispatcher?: Dispatcher; apiKey?: string | undefined } = { apiKey: options.apiKey },
): Promise<Attested> {
  const waive: Waivers = {};
  if (options.allowNoTee === true) waive.noHardwareEnclave = 'allowNoTee: a development service without hardware is accepted';
  if (options.allowUnpinnedCode === true) waive.unpinnedCode = 'allowUnpinnedCode: code nobody pinned is accepted';
  return attest({
    baseURL: options.baseURL,
    reference: inputs.reference,
    release: inputs.release,
    waive,
    roots: options.roots,
    gpuRoots: options.gpuRoots,
    freshReport: options.freshReport,
    apiKey: channel.apiKey,
    collateral: inputs.collateral,
    dispatcher: channel.dispatcher,
    ...(options.now === undefined ? {} : { now: options.now }),
  });
}

/** A verdict that is not verified rejects, naming the checks. */
function refuseUnverified(result: Attested): Attested {
  if (result.verdict.outcome === 'not-verified')
    throw new AttestationError(
      `the service's attestation did not verify, so nothing was sent: ${result.verdict.summary}: ${failedSummary(result.checks)}${acceptingOptionsNote(result.checks)}`,
      result.checks,
    );
  return result;
}

/**
 * Through an Oblivious HTTP relay (docs/ohttp.md, "Clients"): the gateway key fetched through the relay, the attestation
 * fetched sealed to it, then the key held to the one the attestation binds (`attestation.ohttp_key`). The attestation's
 * requests are sealed to a key not yet checked: they carry nothing secret but the API key, which goes only to a key an
 * earlier verdict bound (docs/decisions.md).
 */
async function attestThroughRelay(
  options: AttestedFetchOptions,
  inputs: Awaited<ReturnType<typeof readInputs>>,
  relayUrl: string,
  trusted: { sealingKey?: string },
): Promise<Attested> {
  const keys = await fetchGatewayKeys(relayUrl);
  const sealingKey = sealingKeyOf(keys);
  const channel = new ObliviousDispatcher({ relayUrl, keys });
  try {
    const result = await attestOnce(options, inputs, { dispatcher: channel, apiKey: sealingKey === trusted.sealingKey ? options.apiKey : undefined });
    const checks = relayedChecks(result.checks, keys, result.evidence.attestation);
    const attested = refuseUnverified({ ...result, checks, verdict: verdictOf(checks) });
    trusted.sealingKey = sealingKey;
    return attested;
  } finally {
    await channel.close();
  }
}

/**
 * An attested `fetch` (docs/tls.md): before the first request it fetches the attestation with a fresh nonce over
 * a TLS connection pinned to the key it presents and verifies it (evidence, binding, TLS key, GPU evidence, reference
 * values); every request then goes only over connections presenting the attested key, and every receipt
 * is verified over the exact bytes sent and received. The verdict is renewed every `reattestEvery` and before
 * what it rested on expires; a new TLS key or signing key is re-attested before use. Each request passes named steps
 * (src/client/steps): prepare, seal or send in the clear over the pinned connections, verify the receipt, check inclusion.
 */
export async function createAttestedFetch(options: AttestedFetchOptions): Promise<AttestedFetch> {
  const inputs = await readInputs(options);
  const reattestEveryMs = options.reattestEvery ?? DEFAULT_REATTEST_EVERY_MS;
  if (!Number.isSafeInteger(reattestEveryMs) || reattestEveryMs < 1000)
    throw new TypeError(`reattestEvery is a whole number of milliseconds, at least 1000 (a second); got ${String(options.reattestEvery)}`);
  const relayUrl = options.ohttpRelay;
  const trusted = {};
  const session = await AttestedSession.start({
    verify: async () => (relayUrl === undefined ? refuseUnverified(await attestOnce(options, inputs)) : attestThroughRelay(options, inputs, relayUrl, trusted)),
    reattestEveryMs,
    now: options.now ?? (() => new Date()),
    ca: options.ca,
    ...(relayUrl === undefined
      ? {}
      : { connectionsFor: (attested: Attested) => new ObliviousDispatcher({ relayUrl, keys: boundGatewayKeys(attested.evidence.attestation) }) }),
  });
  const receipts: ReceiptResult[] = [];
  const base = new URL(options.baseURL);
  const client: ClientContext = {
    session,
    base,
    throughRelay: relayUrl !== undefined,
    headerNames: brandHeaders(options.brand ?? 'Service'),
    onInvalid: options.onInvalidReceipt ?? 'throw',
    requireInclusion: options.requireInclusion === true,
    maxAnswerBytes: options.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES,
    inclusion: new InclusionCheck(session, base, options),
    record: (result) => {
      receipts.push(result);
      if (receipts.length > KEPT_RECEIPTS) receipts.shift();
      options.onReceipt?.(result);
    },
    onExchange: options.onExchange,
  };

  const attestedFetch = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const prepared = await prepare(client, await session.current(), input, init);
    const fromPolicy = attestedCatalogue(prepared, base);
    if (fromPolicy !== undefined) return fromPolicy;
    const answered = prepared.encrypts ? await sendSealed(client, prepared) : await sendClear(client, prepared);
    return 'finished' in answered ? answered.finished : verifyReceipt(client, answered);
  };

  return Object.defineProperties(attestedFetch, {
    attestation: { get: () => session.attested, enumerable: true },
    receipts: { get: () => receipts, enumerable: true },
    renewal: { get: () => session.renewal, enumerable: true },
    checkInclusion: {
      value: async (receipt: string, index?: number): Promise<InclusionVerdict> => client.inclusion.check(receipt, index),
      enumerable: true,
    },
    close: {
      value: () => {
        client.inclusion.close();
        return session.close();
      },
      enumerable: true,
    },
  }) as unknown as AttestedFetch;
}
