import { randomBytes } from 'node:crypto';
import { Identity } from 'ehbp';
import { Agent, fetch as undiciFetch } from 'undici';
import type { TrustRoots } from '../verify/attestation.ts';
import { isNotPinned, isWaived, type Check } from '../verify/check.ts';
import type { Waivers } from '../verify/verify-service.ts';
import type { GpuTrustRoots } from '../verify/gpu/index.ts';
import { VerifyError } from '../verify/errors.ts';
import { pinnedAgent, SpkiPin, tlsPinErrorOf } from '../verify/tls-pin.ts';
import { attest, type Attested } from './attest.ts';
import { readReferenceValues } from '../verify/reference/load.ts';
import { readCollateralDirectory, type CollateralBundle } from '../verify/evidence/collateral/bundle.ts';
import type { ReferenceValues } from '../verify/reference/reference-values.ts';
import { withReleaseValues } from '../verify/release/reference-from-release.ts';
import type { ReleaseTrust } from '../verify/release/trust.ts';
import { readFile } from 'node:fs/promises';
import { verifyExchangeReceipt, type Exchange, type ReceiptResult } from './receipts.ts';
import { exchangeReceiptNonce, splitSealedJson } from '../protocol/sealed-receipt.ts';
import { brandHeaders, NONCE_VALUE } from '../protocol/brand-headers.ts';
import { InclusionWatch, type InclusionVerdict } from '../verify/tlog/receipt-inclusion.ts';
import { attestedLog, loggedReceipts, responseVerdict } from './log-inclusion.ts';

export type { Attested } from './attest.ts';
export type { ReferenceValues } from '../verify/reference/reference-values.ts';
export type { Exchange, ReceiptResult } from './receipts.ts';
export type { ReleaseTrust } from '../verify/release/trust.ts';
export type { CollateralBundle } from '../verify/evidence/collateral/bundle.ts';
export type { InclusionVerdict } from '../verify/tlog/receipt-inclusion.ts';
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
}

/** A `fetch` for one attested service; the OpenAI SDK takes it as is (`new OpenAI({ baseURL, apiKey, fetch })`). */
export interface AttestedFetch {
  (input: string | URL | Request, init?: RequestInit): Promise<Response>;
  /** The attestation currently trusted: its checks and what it vouches for. */
  readonly attestation: Attested;
  /** The most recent receipt verdicts, newest last (at most 100). */
  readonly receipts: readonly ReceiptResult[];
  /**
   * Checks that the attested service's transparency log holds a receipt (a compact JWS), at `index` if known, else found by
   * its receipt id; waits for its batch up to the log's maximum merge delay. Never rejects: a failure is `ok: false`.
   */
  checkInclusion(receipt: string, index?: number): Promise<InclusionVerdict>;
  /** Closes the pinned connections; inclusion checks still waiting end with a failed verdict that says so. */
  close(): Promise<void>;
}

const KEPT_RECEIPTS = 100;

/** The error a refused attestation or receipt raises: `checks` says which check failed and why. */
export class AttestationError extends VerifyError {
  constructor(
    message: string,
    readonly checks: readonly Check[],
    code: 'ERR_VERIFY_ATTESTATION' | 'ERR_VERIFY_RECEIPT' = 'ERR_VERIFY_ATTESTATION',
  ) {
    super(code, message);
  }
}

function failedSummary(checks: readonly Check[]): string {
  return checks
    .filter((c) => (!c.ok && !isWaived(c)) || isNotPinned(c))
    .map((c) => `${c.name}: ${isNotPinned(c) ? 'NOT PINNED: ' : ''}${c.detail}`)
    .join('; ');
}

/** The response header that says an answer was not authenticated: neither sealed, nor over TLS ending in the enclave, nor under a receipt. */
export const UNVERIFIED_HEADER = 'x-attested-fetch-unverified';

function markedUnverified(response: Response): Response {
  const headers = new Headers(response.headers);
  headers.set(
    UNVERIFIED_HEADER,
    'this answer was neither sealed nor sent over TLS ending in the enclave nor covered by a receipt: anyone between you and the enclave could have written it',
  );
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}

function isEventStream(response: Response): boolean {
  return (response.headers.get('content-type') ?? '').startsWith('text/event-stream');
}

async function bytesOf(body: RequestInit['body'] | undefined): Promise<Uint8Array | undefined> {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string') return new TextEncoder().encode(body);
  if (body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  if (ArrayBuffer.isView(body)) return new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  return new Uint8Array(await new Response(body as BodyInit).arrayBuffer());
}

/**
 * An attested `fetch` (docs/tls.md): before the first request it fetches the attestation with a fresh nonce over
 * a TLS connection pinned to the key it presents and verifies it (evidence, binding, TLS key, GPU evidence, reference
 * values); every request then goes only over connections presenting the attested key, and every receipt
 * is verified over the exact bytes sent and received. A new TLS key or signing key is re-attested before use.
 */
export async function createAttestedFetch(options: AttestedFetchOptions): Promise<AttestedFetch> {
  const reference = typeof options.reference === 'string' ? await readReferenceValues(options.reference) : options.reference;
  if (options.release !== undefined && reference !== undefined) {
    try {
      withReleaseValues(reference, undefined);
    } catch (err) {
      throw new TypeError((err as Error).message, { cause: err });
    }
  }
  const releaseBundle =
    options.release === undefined ? undefined : typeof options.release.bundle === 'string' ? await readFile(options.release.bundle) : options.release.bundle;
  const release = releaseBundle === undefined ? undefined : { bundle: releaseBundle, trust: options.release!.trust };
  const collateral = typeof options.collateral === 'string' ? await readCollateralDirectory(options.collateral) : options.collateral;
  const allowNoTee = options.allowNoTee ?? false;
  const base = new URL(options.baseURL);
  const brand = options.brand ?? 'Service';
  const headerNames = brandHeaders(brand);
  const onInvalid = options.onInvalidReceipt ?? 'throw';

  const waive: Waivers = {};
  if (allowNoTee) waive.noHardwareEnclave = 'allowNoTee: a development service without hardware is accepted';
  if (options.allowUnpinnedCode === true) waive.unpinnedCode = 'allowUnpinnedCode: code nobody pinned is accepted';
  const verifyService = async (): Promise<Attested> => {
    const result = await attest({
      baseURL: options.baseURL,
      reference,
      release,
      waive,
      roots: options.roots,
      gpuRoots: options.gpuRoots,
      freshReport: options.freshReport,
      apiKey: options.apiKey,
      collateral,
    });
    if (result.verdict.outcome === 'not-verified')
      throw new AttestationError(
        `the service's attestation did not verify, so nothing was sent: ${result.verdict.summary}: ${failedSummary(result.checks)}`,
        result.checks,
      );
    return result;
  };

  let attested = await verifyService();
  const pin = new SpkiPin(attested.tlsSpkiSha256 === null ? [] : [attested.tlsSpkiSha256]);
  // TLS ending in the enclave is pinned; TLS ending before it (bodies sealed with EHBP) is checked as the web checks it.
  const agent: Agent = attested.tlsSpkiSha256 !== null ? pinnedAgent(pin) : new Agent(options.ca === undefined ? {} : { connect: { ca: options.ca } });
  let sealing: Promise<Identity> | undefined;
  const identity = () => (sealing ??= Identity.unmarshalPublicConfig(attested.hpkeKeyConfig!));
  const receipts: ReceiptResult[] = [];
  let reattesting: Promise<Attested> | undefined;
  const reattest = () => (reattesting ??= verifyService().finally(() => (reattesting = undefined)));

  const record = (result: ReceiptResult) => {
    receipts.push(result);
    if (receipts.length > KEPT_RECEIPTS) receipts.shift();
    options.onReceipt?.(result);
  };

  // The log is read over the client's own connections (pinned when TLS ends in the enclave).
  const fetchLog = ((input: string) => undiciFetch(input, { dispatcher: agent })) as unknown as typeof fetch;
  const watch = new InclusionWatch({
    log: async (fresh) => {
      if (fresh) attested = await reattest();
      return attestedLog(attested, base, fetchLog);
    },
    ...(options.logStateFile === undefined ? {} : { stateFile: options.logStateFile }),
  });
  const inclusionOf = async (logged: ReturnType<typeof loggedReceipts>, result: ReceiptResult): Promise<InclusionVerdict> => {
    const verdict = responseVerdict(await Promise.all(logged.map((r) => watch.check(r.jws, r.index))));
    if (options.onInclusion !== undefined) options.onInclusion(verdict, result);
    else if (!verdict.ok) process.emitWarning(`receipt ${String(verdict.receiptId)}: ${verdict.detail}`, { code: 'SIGIL_LOG_INCLUSION' });
    return verdict;
  };
  const checksLog = () => options.checkLogInclusion !== false && attested.transparencyLog !== null;

  const check = async (
    exchange: Parameters<typeof verifyExchangeReceipt>[0],
    log: { indexHeader: string | null; sealedIndex?: number | undefined; sealed: boolean } = { indexHeader: null, sealed: false },
  ): Promise<ReceiptResult> => {
    let result = await verifyExchangeReceipt(exchange, attested);
    // A key the attested JWKS does not hold: the service may have rotated it; re-attest once and look again.
    if (!result.ok && result.checks.some((c) => c.name === 'receipt.signature' && !c.ok)) {
      attested = await reattest();
      result = await verifyExchangeReceipt(exchange, attested);
    }
    const logged = loggedReceipts(exchange, log.indexHeader, log.sealedIndex, log.sealed);
    if (logged[0]?.index !== undefined) result.logIndex = logged[0].index;
    // Only a receipt that verified is looked for; the response is not held back for it.
    if (result.ok && checksLog() && logged.length > 0) result.inclusion = inclusionOf(logged, result);
    record(result);
    options.onExchange?.(exchange, result, attested);
    return result;
  };

  const send = async (url: URL, init: RequestInit, body: Uint8Array | undefined) => {
    const request = { ...init, ...(body === undefined ? {} : { body }), dispatcher: agent } as Parameters<typeof undiciFetch>[1];
    try {
      return await undiciFetch(url, request);
    } catch (err) {
      const pinError = tlsPinErrorOf(err);
      if (pinError === undefined || pinError.presented === undefined) throw err;
      // The connector refused an unknown key before sending anything: attest the server that holds it, then retry once.
      const renewed = await reattest();
      if (renewed.tlsSpkiSha256 !== pinError.presented) throw pinError;
      attested = renewed;
      pin.accept(renewed.tlsSpkiSha256);
      return await undiciFetch(url, request);
    }
  };

  const attestedFetch = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const request = input instanceof Request ? input : undefined;
    const url = new URL(request?.url ?? String(input));
    if (url.origin !== base.origin) throw new VerifyError('ERR_VERIFY_FETCH', `this attested fetch talks only to ${base.origin}, not ${url.origin}`);
    const method = (init.method ?? request?.method ?? 'GET').toUpperCase();
    const headers = new Headers(init.headers ?? request?.headers);
    // Receipts hash the bytes on the wire: no compression between them and us.
    headers.set('accept-encoding', 'identity');
    const body = await bytesOf(init.body ?? (request === undefined ? undefined : await request.arrayBuffer()));
    const wantsReceipt = method === 'POST';
    const encrypts = attested.hpkeKeyConfig !== null && body !== undefined && body.length > 0;
    // The app's own nonce is honoured as sent (docs/ehbp.md, "The nonce"); else, sealed, none travels: both ends derive it from the
    // request's HPKE context; in the clear, a fresh one goes in the header.
    const ownNonce = headers.get(headerNames.nonce) ?? undefined;
    if (ownNonce !== undefined && !NONCE_VALUE.test(ownNonce))
      throw new VerifyError(
        'ERR_VERIFY_NONCE',
        `the ${headerNames.nonce} header must be 1 to 256 printable ASCII characters (the service would refuse it); nothing was sent`,
      );
    let nonce = ownNonce ?? randomBytes(32).toString('hex');
    if (wantsReceipt) {
      headers.set(headerNames.receipt, 'true');
      if (!encrypts && ownNonce === undefined) headers.set(headerNames.nonce, nonce);
    }
    const exchangeOf = (answer: Response, responseBytes: Uint8Array) => ({
      path: url.pathname,
      nonce,
      requestBytes: body ?? new Uint8Array(),
      responseBytes,
      stream: isEventStream(answer),
      receiptHeader: answer.headers.get(headerNames.receipt),
    });
    let response: Response;
    if (encrypts) {
      // EHBP: sealed to the attested key; the response is opened as it streams (a missing or bad nonce fails).
      const sendSealed = async () => {
        const sealed = await (await identity()).encryptRequestWithContext(new Request(url, { method, headers, body: body as unknown as BodyInit }));
        const sealedBody = new Uint8Array(await sealed.request.arrayBuffer());
        const raw = (await send(url, { ...init, method, headers: sealed.request.headers }, sealedBody)) as unknown as Response;
        return { sealed, raw };
      };
      let { sealed, raw } = await sendSealed();
      if (raw.status === 422 && (raw.headers.get('content-type') ?? '').startsWith('application/problem+json')) {
        // Sealed to a key the service no longer holds (it restarted): nothing was processed; re-attest its new key, send once more.
        await raw.arrayBuffer();
        attested = await reattest();
        sealing = undefined;
        if (attested.hpkeKeyConfig === null) throw new AttestationError('the service no longer offers an attested HPKE key', attested.checks);
        ({ sealed, raw } = await sendSealed());
      }
      if (ownNonce === undefined) nonce = await exchangeReceiptNonce(sealed.context!.senderContext);
      // Refusals made before the body was opened (a bad API key, a limit: docs/ehbp.md) come in the clear: an error, never a success, so it is returned marked.
      if (raw.headers.get('ehbp-response-nonce') === null && raw.status >= 400)
        return attested.tlsSpkiSha256 === null ? markedUnverified(raw as unknown as Response) : (raw as unknown as Response);
      if (raw.headers.get('ehbp-response-nonce') === null) {
        // Nothing sealed it, so anyone on the way could have written it: never hand it over as the service's answer.
        await raw.body?.cancel();
        throw new VerifyError(
          'ERR_VERIFY_UNSEALED_RESPONSE',
          `the answer to a sealed request (HTTP ${raw.status}) is not sealed to our request: it may not come from the enclave, so it is not returned`,
        );
      }
      response = await (await identity()).decryptResponseWithContext(raw, sealed.context!);
    } else {
      response = (await send(url, { ...init, method, headers }, body)) as unknown as Response;
    }
    if (!wantsReceipt && attested.tlsSpkiSha256 === null) return markedUnverified(response);
    if (!wantsReceipt || response.status < 200 || response.status > 299) return response;
    if (response.body === null) {
      const result = await check(exchangeOf(response, new Uint8Array()));
      if (!result.ok)
        throw new AttestationError(
          `the response's receipt did not verify: ${result.problem ?? failedSummary(result.checks)}`,
          result.checks,
          'ERR_VERIFY_RECEIPT',
        );
      return response;
    }

    const stream = isEventStream(response);
    const init2 = { status: response.status, statusText: response.statusText, headers: response.headers as unknown as Headers };
    if (!stream) {
      let bytes = new Uint8Array(await response.arrayBuffer());
      // Sealed, the receipt is the body's last frame: the caller gets the engine's bytes alone.
      const trailer = encrypts ? splitSealedJson(bytes) : undefined;
      if (trailer !== undefined) bytes = new Uint8Array(trailer.body);
      const result = await check(
        { ...exchangeOf(response, bytes), receiptHeader: encrypts ? (trailer?.receipt ?? null) : response.headers.get(headerNames.receipt) },
        { indexHeader: response.headers.get(headerNames.logIndex), sealedIndex: trailer?.logIndex, sealed: encrypts },
      );
      if (!result.ok && onInvalid === 'throw')
        throw new AttestationError(
          `the response's receipt did not verify: ${result.problem ?? failedSummary(result.checks)}`,
          result.checks,
          'ERR_VERIFY_RECEIPT',
        );
      return new Response(bytes, init2);
    }
    // Each chunk goes to the caller as it arrives; the receipt at the end is checked over all of them.
    const chunks: Uint8Array[] = [];
    const verified = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        chunks.push(chunk);
        controller.enqueue(chunk);
      },
      async flush(controller) {
        const result = await check(exchangeOf(response, Buffer.concat(chunks)), { indexHeader: response.headers.get(headerNames.logIndex), sealed: encrypts });
        if (!result.ok && onInvalid === 'throw')
          controller.error(
            new AttestationError(`the stream's receipt did not verify: ${result.problem ?? failedSummary(result.checks)}`, result.checks, 'ERR_VERIFY_RECEIPT'),
          );
      },
    });
    return new Response(response.body.pipeThrough(verified), init2);
  };

  return Object.defineProperties(attestedFetch, {
    attestation: { get: () => attested, enumerable: true },
    receipts: { get: () => receipts, enumerable: true },
    checkInclusion: {
      value: async (receipt: string, index?: number): Promise<InclusionVerdict> => watch.check(receipt, index),
      enumerable: true,
    },
    close: {
      value: () => {
        watch.close();
        return agent.close();
      },
      enumerable: true,
    },
  }) as unknown as AttestedFetch;
}
