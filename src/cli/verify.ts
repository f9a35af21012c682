import { START_NONCE } from '../protocol/attestation.ts';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { parseArgs } from 'node:util';
import { verifyAttestationDocument } from '../verify/attestation.ts';
import { verifyGpuEvidence, type GpuTrustRoots } from '../verify/gpu/index.ts';
import { readReferenceValues } from '../verify/reference/load.ts';
import { readCollateralBundle } from '../verify/evidence/collateral/bundle.ts';
import type { IntelCollateral } from '../verify/evidence/collateral/intel-collateral.ts';
import type { ReferenceValues } from '../verify/reference/reference-values.ts';
import type { GpuEvidence } from '../protocol/attestation.ts';
import type { TrustRoots } from '../verify/attestation.ts';
import { evidenceBytes, verifyJwksBinding } from '../verify/binding.ts';
import { checkMark, fail, isNotPinned, isWaived, pass, verdictOf, waive, type VerdictOutcome } from '../verify/check.ts';
import type { Check } from '../verify/check.ts';
import type { ReceiptClaims } from '../verify/claims.ts';
import { canonicalPolicyHash, sha256Tagged } from '../verify/digest.ts';
import { VerifyError, isVerifyError } from '../verify/errors.ts';
import { toEar } from '../verify/ear.ts';
import { firstListedModel, sendChatWithReceipt } from '../verify/live-request.ts';
import { policyModelCheck } from '../verify/policy-model.ts';
import { NO_TEE_DETAIL, verifyReceipt } from '../verify/receipt.ts';
import type { ReceiptExpectations } from '../verify/receipt.ts';
import { fetchJwks, fetchStartAttestation, fetchVerificationMaterial } from '../verify/service.ts';
import { acceptDevelopmentPlaintext, pinnedAgent, SpkiPin, tlsBindingCheck } from '../verify/tls-pin.ts';
import { fetchHpkeKeyConfig, hpkeBindingCheck } from '../verify/hpke-binding.ts';
import type { Dispatcher } from 'undici';
import { withReleaseValues } from '../verify/release/reference-from-release.ts';
import { releaseReference } from '../verify/release/release-reference.ts';
import { RELEASE_TRUST_OPTIONS, releaseTrustFrom, releaseUsageProblem } from './release-trust.ts';

/** Exit statuses: 0 every check passed; 1 a check failed; 2 bad usage; 3 the verification could not be carried out. */
export const EXIT = { ok: 0, checkFailed: 1, usage: 2, unavailable: 3 } as const;

const USAGE = `usage:
  sigil verify RECEIPT_FILE|- (--jwks FILE|URL | --url BASE) [--nonce TEXT] [--measurement HEX]
               [--policy FILE] [--attestation FILE] [--request FILE] [--response FILE]
               [--reference FILE] [--release FILE RELEASE_TRUST] [--collateral DIR] [--allow-no-tee]
               [--allow-unpinned-code] [--json]
  sigil verify --url BASE [--api-key KEY] [--model ID] [--stream] [--reference FILE] [--release FILE RELEASE_TRUST]
               [--collateral DIR] [--allow-no-tee] [--allow-unpinned-code] [--json]
  RELEASE_TRUST: --key PUB.pem | --identity ID --issuer URL [--trusted-root FILE]

Verifies a Sigil receipt (docs/receipts.md) and, with --url, the attestation evidence binding its key (docs/attestation.md).
The first form checks a receipt you kept; the second makes a live chat completion with a fresh
nonce and checks everything about it. Each check prints as "PASS name — detail" or "FAIL name — detail".

  --jwks FILE|URL     the JWKS to verify against (default with --url: BASE/v1/verify/jwks.json)
  --url BASE          the service; fetches its JWKS, policy and fresh attestation evidence
  --api-key KEY       live mode; or set SIGIL_API_KEY (never printed)
  --model ID          live mode: the model to ask (default: the first one GET /v1/models lists)
  --stream            live mode: stream the answer and check the message receipt after [DONE]
  --nonce TEXT        the X-<Brand>-Nonce you sent (default: none, so the receipt must carry "")
  --measurement HEX   the enclave measurement you expect (from a reproducible build)
  --policy FILE       the policy document you expect (default with --url: BASE/v1/verify/policy)
  --attestation FILE  offline: a saved attestation document, best the start evidence
                      (GET BASE/v1/verify/attestation without a nonce), which attestation_hash names
  --request FILE      the exact request body you sent
  --response FILE     the exact response body you received (streams: up to and including data: [DONE])
  --reference FILE    reference values (docs/auditing.md): TDX/SNP values, and gpu.rims, the NVIDIA RIMs the GPU
                      measurements must match
  --release FILE      a signed release manifest (Sigstore bundle, docs/release.md), verified offline; its values
                      are reference values; --reference FILE may add what a release does not state (machine
                      allow-lists, TCB floors, policy). Any failed release.* check makes the verdict NOT VERIFIED.
                      Whom it must come from: --key PUB.pem (a pinned key; release.tlog prints WAIVED), or
                      --identity ID --issuer URL (a Sigstore certificate identity and OIDC issuer, checked
                      against the public-good trust root, or --trusted-root FILE), as sigil release verify
  --collateral DIR    Intel collateral for TDX evidence (TCB info, QE identity, CRLs; file names in
                      docs/auditing.md), verified offline: gives Intel's TCB status of the platform
  --brand NAME        the brand word of the header names (default Service: X-Service-Receipt)
  --allow-no-tee      accept tee "none" (a development server without hardware evidence): its checks
                      print as WAIVED, never PASS
  --allow-unpinned-code  accept measured values no reference value pins: they print as WAIVED; without
                      it they print as ---- NOT PINNED and the verdict is NOT VERIFIED
  --json              print a machine-readable report (same as --format json)
  --format ear        print the verdict as an IETF RATS EAR claims set (JSON, unsigned; docs/auditing.md)

Exit status: 0 verified (or verified with waivers, each listed), 1 not verified (a check failed or a
value is not pinned), 2 bad usage, 3 could not verify (I/O, network).
`;

export interface VerifyIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  stdin: Readable;
  env: Record<string, string | undefined>;
  /** The AMD and Intel roots to trust; the built-in ones unless a test brings its own. */
  roots?: TrustRoots;
  /** Trusted NVIDIA roots for GPU evidence; the built-in ones unless a test brings its own. */
  gpuRoots?: GpuTrustRoots;
  /** The time certificates must be valid at; now by default. */
  now?: Date;
}

interface Options {
  receipt?: string;
  jwks?: string;
  url?: string;
  apiKey?: string;
  model?: string;
  stream: boolean;
  nonce?: string;
  measurement?: string;
  policy?: string;
  attestation?: string;
  request?: string;
  response?: string;
  reference?: string;
  /** --release FILE and the options naming its signer (--key, --identity, --issuer, --trusted-root). */
  release?: string;
  releaseTrust: Record<string, string | undefined>;
  collateral?: string;
  brand: string;
  allowNoTee: boolean;
  allowUnpinnedCode: boolean;
  json: boolean;
  /** --format ear: print the verdict as an IETF RATS EAR (JSON claims set). */
  ear: boolean;
}

export interface VerifyReport {
  /** True for verified and verified-with-waivers. */
  ok: boolean;
  outcome: VerdictOutcome;
  mode: 'file' | 'live';
  checks: Check[];
  claims?: ReceiptClaims;
  /** RFC 7638 thumbprint of the key that verified the receipt. */
  kid?: string;
}

class UsageError extends Error {
  readonly code = 'ERR_VERIFY_USAGE';
}

function parseOptions(argv: string[], env: VerifyIo['env']): Options {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        jwks: { type: 'string' },
        url: { type: 'string' },
        'api-key': { type: 'string' },
        model: { type: 'string' },
        stream: { type: 'boolean', default: false },
        nonce: { type: 'string' },
        measurement: { type: 'string' },
        policy: { type: 'string' },
        attestation: { type: 'string' },
        request: { type: 'string' },
        response: { type: 'string' },
        reference: { type: 'string' },
        collateral: { type: 'string' },
        release: { type: 'string' },
        ...RELEASE_TRUST_OPTIONS,
        brand: { type: 'string', default: 'Service' },
        'allow-no-tee': { type: 'boolean', default: false },
        'allow-unpinned-code': { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
        format: { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const { values: v, positionals } = parsed;
  if (v.help) throw new UsageError('');
  if (positionals.length > 1) throw new UsageError('give one receipt file (or - for stdin)');
  if (v.format !== undefined && v.format !== 'text' && v.format !== 'json' && v.format !== 'ear') throw new UsageError('--format is text, json or ear');
  const releaseTrust = { key: v.key, identity: v.identity, issuer: v.issuer, 'trusted-root': v['trusted-root'] };
  const o: Options = { releaseTrust, stream: v.stream, brand: v.brand, allowNoTee: v['allow-no-tee'], allowUnpinnedCode: v['allow-unpinned-code'], json: v.json || v.format === 'json', ear: v.format === 'ear' };
  const set = <K extends keyof Options>(key: K, value: Options[K] | undefined) => {
    if (value !== undefined) o[key] = value;
  };
  set('receipt', positionals[0]);
  set('jwks', v.jwks);
  set('url', v.url);
  set('apiKey', v['api-key'] ?? (env.SIGIL_API_KEY || undefined));
  set('model', v.model);
  set('nonce', v.nonce);
  set('measurement', v.measurement?.toLowerCase());
  set('policy', v.policy);
  set('attestation', v.attestation);
  set('request', v.request);
  set('response', v.response);
  set('reference', v.reference);
  set('collateral', v.collateral);
  set('release', v.release);
  releaseUsage(o);
  if (!/^[A-Za-z0-9-]+$/.test(o.brand)) throw new UsageError('--brand is one word of letters, digits and hyphens');
  if (o.measurement !== undefined && !/^(?:[0-9a-f]{2})+$/.test(o.measurement)) throw new UsageError('--measurement is hex');
  if (o.receipt === undefined) {
    if (o.url === undefined) throw new UsageError('give a receipt file, or --url BASE for a live request');
    if (o.apiKey === undefined) throw new UsageError('live mode needs --api-key KEY or SIGIL_API_KEY');
    for (const flag of ['jwks', 'nonce', 'policy', 'attestation', 'request', 'response'] as const) {
      if (o[flag] !== undefined) throw new UsageError(`--${flag} is for checking a receipt file; live mode makes its own`);
    }
  } else {
    if (o.jwks === undefined && o.url === undefined) throw new UsageError('give --jwks FILE|URL or --url BASE');
    if (o.stream || o.model !== undefined) throw new UsageError('--stream and --model are for live mode (no receipt file)');
    if (o.url !== undefined && o.attestation !== undefined) throw new UsageError('give --url BASE (fresh evidence) or --attestation FILE (saved), not both');
  }
  return o;
}

/** --release goes with exactly one way of naming its signer. */
function releaseUsage(o: Options): void {
  const problem = releaseUsageProblem(o.release, o.releaseTrust);
  if (problem !== undefined) throw new UsageError(problem);
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Uint8Array));
  return Buffer.concat(chunks);
}

async function readBytes(path: string, what: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new VerifyError('ERR_VERIFY_FETCH', `cannot read ${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

async function readJsonFile(path: string, what: string): Promise<unknown> {
  try {
    return JSON.parse((await readBytes(path, what)).toString('utf8')) as unknown;
  } catch (err) {
    if (isVerifyError(err)) throw err;
    throw new VerifyError('ERR_VERIFY_FETCH', `${what} ${path} is not JSON`);
  }
}

async function loadJwks(source: string): Promise<{ keys: unknown[] }> {
  if (/^https?:\/\//.test(source)) return fetchJwks(new URL(source));
  const value = await readJsonFile(source, 'JWKS');
  if (typeof value !== 'object' || value === null || !Array.isArray((value as { keys?: unknown }).keys)) {
    throw new VerifyError('ERR_VERIFY_FETCH', `JWKS ${source} has no keys array`);
  }
  return value as { keys: unknown[] };
}

function field(doc: unknown, name: string): unknown {
  return typeof doc === 'object' && doc !== null ? (doc as Record<string, unknown>)[name] : undefined;
}

/** Which flag gives what a receipt check needs. */
const CLI_HINTS: Record<string, string> = {
  'receipt.measurement': 'give --measurement HEX or --url BASE',
  'receipt.policy_hash': 'give --policy FILE or --url BASE',
  'receipt.request_hash': 'give --request FILE',
  'receipt.response_hash': 'give --response FILE',
};

function notChecked(name: string, how: string): Check {
  return fail(name, `not checked: ${how}`);
}

interface LoadedReference {
  values: ReferenceValues;
  /** The text of each RIM the reference file names (gpu.rims). */
  rims?: string[];
}

async function loadReference(path: string | undefined): Promise<LoadedReference | undefined> {
  if (path === undefined) return undefined;
  let values: ReferenceValues;
  try {
    values = await readReferenceValues(path);
  } catch (err) {
    throw new VerifyError('ERR_VERIFY_FETCH', `reference values ${path}: ${(err as Error).message}`);
  }
  const loaded: LoadedReference = { values };
  if (values.gpu?.rims !== undefined) loaded.rims = await Promise.all(values.gpu.rims.map(async (rim) => (await readBytes(rim, 'RIM')).toString('utf8')));
  return loaded;
}

interface ReleaseResult {
  checks: Check[];
  reference: LoadedReference | undefined;
}

/** The release manifest verified offline: its checks, and its values as reference values once every check passed. */
async function loadRelease(o: Options, io: VerifyIo): Promise<ReleaseResult> {
  const trust = await releaseTrustFrom(o.releaseTrust, {
    read: readBytes,
    usage: (m) => new VerifyError('ERR_VERIFY_FETCH', m),
    unreadable: (m) => new VerifyError('ERR_VERIFY_FETCH', m),
  });
  const bundle = await readBytes(o.release!, 'release manifest');
  let result;
  try {
    result = releaseReference(bundle, trust, io.now ?? new Date());
  } catch (err) {
    throw new VerifyError('ERR_VERIFY_FETCH', `the trust root or key could not be used: ${(err as Error).message}`);
  }
  const own = await loadReference(o.reference);
  if (own === undefined) return { checks: result.checks, reference: result.referenceValues === undefined ? undefined : { values: result.referenceValues } };
  try {
    return { checks: result.checks, reference: { ...own, values: withReleaseValues(own.values, result.referenceValues) } };
  } catch (err) {
    throw new VerifyError('ERR_VERIFY_FETCH', `reference values ${o.reference!}: ${(err as Error).message}`);
  }
}

/** The reference values of --reference FILE, --release FILE or both (the file adding what the release does not state), with the release's own checks. */
async function referenceFor(o: Options, io: VerifyIo): Promise<ReleaseResult> {
  if (o.release !== undefined) return loadRelease(o, io);
  return { checks: [], reference: await loadReference(o.reference) };
}

async function loadCollateral(dir: string): Promise<IntelCollateral> {
  try {
    return await readCollateralBundle(dir);
  } catch (err) {
    throw new VerifyError('ERR_VERIFY_FETCH', `cannot read the collateral bundle ${dir}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/** The document's GPU evidence against the nonce this verification used and the RIMs of the reference file. */
function gpuChecks(doc: unknown, nonce: Uint8Array, reference: LoadedReference | undefined, io: VerifyIo): Check[] {
  const entries = field(doc, 'gpu_evidence');
  if (!Array.isArray(entries)) return [fail('gpu.evidence', 'the document has no gpu_evidence list')];
  if (entries.length === 0 && reference?.rims === undefined) return [];
  const bound = field(field(doc, 'binding'), 'gpu_evidence_sha256');
  const options: Parameters<typeof verifyGpuEvidence>[1] = { nonce, boundSha256: Array.isArray(bound) ? (bound as string[]) : [] };
  if (reference?.rims !== undefined) options.rims = reference.rims;
  if (io.gpuRoots !== undefined) options.roots = io.gpuRoots;
  if (io.now !== undefined) options.at = io.now;
  return verifyGpuEvidence(entries as GpuEvidence[], options).checks;
}

/** Hardware evidence and its binding to the JWKS; a document with tee "none" has nothing to verify. */
async function attestationChecks(doc: unknown, jwks: { keys: unknown[] }, nonce: Uint8Array, o: Options, claims: ReceiptClaims | undefined, io: VerifyIo): Promise<Check[]> {
  const roots = io.roots;
  const { checks: releaseChecks, reference } = await referenceFor(o, io);
  const checks = [...releaseChecks, ...verifyJwksBinding(doc, { jwks, nonce })];
  if (field(doc, 'tee') !== 'none') {
    // The hardware verifier compares the evidence's measurement with the document's and with this one.
    const expectedMeasurement = o.measurement ?? claims?.enclave_measurement;
    const opts: Parameters<typeof verifyAttestationDocument>[1] = { jwks: jwks as { keys: object[] }, nonce };
    if (expectedMeasurement !== undefined) opts.expectedMeasurement = expectedMeasurement;
    if (roots !== undefined) opts.roots = roots;
    if (claims !== undefined) opts.receipt = claims;
    if (reference !== undefined) opts.reference = reference.values;
    if (o.collateral !== undefined) opts.intelCollateral = await loadCollateral(o.collateral);
    checks.push(...(await verifyAttestationDocument(doc, opts)));
    checks.push(...gpuChecks(doc, nonce, reference, io));
    return checks;
  }
  checks.push(
    o.allowNoTee
      ? waive(fail('attestation.evidence', `tee is "none": ${NO_TEE_DETAIL}`), '--allow-no-tee: a development service without hardware')
      : fail('attestation.evidence', `tee is "none": ${NO_TEE_DETAIL}`),
  );
  if (o.measurement !== undefined) {
    const measured = field(doc, 'measurement');
    checks.push(
      measured === o.measurement
        ? pass('attestation.measurement', `the document's measurement is the expected ${o.measurement}`)
        : fail('attestation.measurement', `the document's measurement is ${String(measured)}; expected ${o.measurement}`),
    );
  }
  checks.push(...gpuChecks(doc, nonce, reference, io));
  return checks;
}

/** `attestation_hash` names the evidence made at start; only hardware evidence has one. */
const START_NONCE_HEX = Buffer.from(START_NONCE).toString('hex');

async function startEvidenceHash(base: string, doc: unknown, dispatcher?: Dispatcher): Promise<string | undefined> {
  if (field(doc, 'tee') === 'none') return undefined;
  const bytes = evidenceBytes(await fetchStartAttestation(base, dispatcher));
  return bytes === undefined ? undefined : sha256Tagged(bytes);
}

/** A saved attestation document binds the nonce it was made for; the start evidence has none. */
function documentNonce(doc: unknown): Uint8Array {
  const nonce = field(doc, 'nonce');
  if (typeof nonce !== 'string' || !/^(?:[0-9a-fA-F]{2})*$/.test(nonce)) {
    throw new VerifyError('ERR_VERIFY_FETCH', 'the attestation document has no hex nonce');
  }
  return new Uint8Array(Buffer.from(nonce, 'hex'));
}

async function expectationsFrom(doc: unknown, policy: unknown, o: Options, dispatcher?: Dispatcher): Promise<ReceiptExpectations> {
  const expected: ReceiptExpectations = {};
  const measured = field(doc, 'measurement');
  const measurement = o.measurement ?? (typeof measured === 'string' ? measured : undefined);
  if (measurement !== undefined) expected.measurement = measurement;
  if (policy !== undefined) expected.policyHash = canonicalPolicyHash(policy);
  if (o.url !== undefined && doc !== undefined) {
    const hash = await startEvidenceHash(o.url, doc, dispatcher);
    if (hash !== undefined) expected.attestationHash = hash;
  } else if (field(doc, 'nonce') === START_NONCE_HEX && field(doc, 'tee') !== 'none') {
    const bytes = evidenceBytes(doc);
    if (bytes !== undefined) expected.attestationHash = sha256Tagged(bytes);
  }
  return expected;
}

async function verifyFile(o: Options, io: VerifyIo): Promise<VerifyReport> {
  const text = o.receipt === '-' ? await readAll(io.stdin) : await readBytes(o.receipt!, 'receipt');
  const jws = text.toString('utf8').trim();
  let nonce: Uint8Array = randomBytes(32);
  const material = o.url === undefined ? undefined : await fetchVerificationMaterial(o.url, nonce);
  const jwks = o.jwks !== undefined ? await loadJwks(o.jwks) : material!.jwks;
  // Fresh evidence for our nonce with --url; else a saved document (best the start evidence, which attestation_hash names).
  let doc: unknown = material?.attestation;
  if (o.attestation !== undefined) {
    doc = await readJsonFile(o.attestation, 'attestation document');
    nonce = documentNonce(doc);
  }
  const policy = o.policy !== undefined ? await readJsonFile(o.policy, 'policy') : material?.policy;
  const expected = await expectationsFrom(doc, policy, o);
  if (o.nonce !== undefined) expected.nonce = o.nonce;
  if (o.request !== undefined) expected.requestBytes = await readBytes(o.request, 'request');
  if (o.response !== undefined) expected.responseBytes = await readBytes(o.response, 'response');

  const result = await verifyReceipt(jws, { jwks, expected, allowNoTee: o.allowNoTee });
  // The library fails what it was not given (docs/receipts.md, "How to verify"); the CLI says which flag gives it.
  const checks = result.checks.map((c) => (!c.ok && c.detail.startsWith('not checked:') && CLI_HINTS[c.name] !== undefined ? { ...c, detail: `not checked: ${CLI_HINTS[c.name]}` } : c));
  const claims = result.claims;
  if (claims !== undefined) {
    if (policy !== undefined) checks.push(policyModelCheck(policy, claims.selected_model));
    if (doc === undefined && claims.tee !== 'none') checks.push(notChecked('attestation.evidence', 'give --attestation FILE or --url BASE'));
  }
  // Without evidence nothing is compared with the release, but a bad release still fails the verdict.
  if (doc === undefined && o.release !== undefined) checks.push(...(await loadRelease(o, io)).checks);
  if (doc !== undefined) checks.push(...(await attestationChecks(doc, jwks, nonce, o, claims, io)));
  return report('file', checks, result, o);
}

/**
 * The TLS key check of a live verification: the key the pinned connection presented against the attested
 * one. A development service (tee "none") over plain HTTP passes only with --allow-no-tee.
 */
function tlsKeyCheck(base: string, pin: SpkiPin, doc: unknown, o: Options): Check {
  const url = new URL(base);
  return acceptDevelopmentPlaintext(tlsBindingCheck(url, pin.accepted, readBindingTlsKey(doc)), url, field(doc, 'tee'), o.allowNoTee ? '--allow-no-tee' : undefined);
}

function readBindingTlsKey(doc: unknown): string | null {
  const key = field(field(doc, 'binding'), 'tls_spki_sha256');
  return typeof key === 'string' ? key : null;
}

async function verifyLive(o: Options, io: VerifyIo): Promise<VerifyReport> {
  const base = o.url!;
  const nonce = randomBytes(32);
  const nonceText = nonce.toString('hex');
  // Attest first, over a connection pinned to the key it presents; the prompt goes only to that key.
  const pin = new SpkiPin();
  const dispatcher = pinnedAgent(pin);
  try {
    const material = await fetchVerificationMaterial(base, nonce, dispatcher);
    const tlsKey = tlsKeyCheck(base, pin, material.attestation, o);
    // A service that claims hardware, or any https one, gets no prompt over a connection the enclave does not
    // vouch for. A development service (tee "none") over plain HTTP is verified on, and fails on its lack of TEE.
    const development = field(material.attestation, 'tee') === 'none' && new URL(base).protocol === 'http:';
    if (!tlsKey.ok && !development) return report('live', [tlsKey, fail('live.request', 'not sent: the connection does not end in the attested enclave')], {}, o);
    const attestedHpke = field(field(material.attestation, 'binding'), 'hpke_key_config');
    const hpkeKey = typeof attestedHpke === 'string' ? hpkeBindingCheck(await fetchHpkeKeyConfig(base, dispatcher).catch((err: Error) => err), attestedHpke) : undefined;
    return await exchangeAndVerify(o, io, { base, nonce, nonceText, material, dispatcher, tlsKey, hpkeKey });
  } finally {
    await dispatcher.close();
  }
}

interface LiveContext {
  base: string;
  nonce: Buffer;
  nonceText: string;
  material: Awaited<ReturnType<typeof fetchVerificationMaterial>>;
  dispatcher: Dispatcher;
  tlsKey: Check;
  /** Present when the service offers encrypted bodies: whether the key it serves is the attested one. */
  hpkeKey: Check | undefined;
}

async function exchangeAndVerify(o: Options, io: VerifyIo, live: LiveContext): Promise<VerifyReport> {
  const { base, nonce, nonceText, material, dispatcher } = live;
  const model = o.model ?? (await firstListedModel(base, dispatcher));
  const exchange = await sendChatWithReceipt({ baseUrl: base, apiKey: o.apiKey!, model, stream: o.stream, nonce: nonceText, brand: o.brand, dispatcher });
  const checks: Check[] = [
    live.tlsKey,
    ...(live.hpkeKey === undefined ? [] : [live.hpkeKey]),
    pass(
      'live.request',
      `${o.stream ? 'streamed' : 'JSON'} completion from ${model}: ${exchange.requestBytes.length} request bytes, ` +
        `${exchange.responseBytes.length} response bytes, message receipt from the ${exchange.receiptSource}`,
    ),
  ];
  const expected = await expectationsFrom(material.attestation, material.policy, o, dispatcher);
  expected.nonce = nonceText;
  expected.modelId = model;
  const message: ReceiptExpectations = { ...expected, receiptType: 'message', requestBytes: exchange.requestBytes, responseBytes: exchange.responseBytes };
  if (exchange.completionId !== undefined) message.completionId = exchange.completionId;
  const result = await verifyReceipt(exchange.receipt, { jwks: material.jwks, expected: message, allowNoTee: o.allowNoTee });
  checks.push(...result.checks);

  if (exchange.modelReceipt !== undefined) {
    const modelResult = await verifyReceipt(exchange.modelReceipt, { jwks: material.jwks, expected: { ...expected, receiptType: 'model' }, allowNoTee: o.allowNoTee });
    checks.push(...modelResult.checks.map((c) => ({ ...c, name: c.name.replace(/^receipt\./, 'model_receipt.') })));
    const ids = [result.claims?.receipt_id, modelResult.claims?.receipt_id, exchange.receiptId];
    checks.push(
      ids.every((id) => id !== undefined && id === ids[0])
        ? pass('live.receipt_id', `the model and message receipts and the receipt id header all name ${ids[0]}`)
        : fail('live.receipt_id', `receipt ids differ: message ${String(ids[0])}, model ${String(ids[1])}, header ${String(ids[2])}`),
    );
  }
  if (result.claims !== undefined) checks.push(policyModelCheck(material.policy, result.claims.selected_model));
  checks.push(...(await attestationChecks(material.attestation, material.jwks, nonce, o, result.claims, io)));
  return report('live', checks, result, o);
}

function report(mode: VerifyReport['mode'], found: Check[], result: { claims?: ReceiptClaims; kid?: string }, o: Options): VerifyReport {
  const checks = o.allowUnpinnedCode ? found.map((c) => (isNotPinned(c) ? waive(c, '--allow-unpinned-code: values nobody pinned are accepted') : c)) : found;
  const verdict = verdictOf(checks);
  const out: VerifyReport = { ok: verdict.outcome !== 'not-verified', outcome: verdict.outcome, mode, checks };
  if (result.claims !== undefined) out.claims = result.claims;
  if (result.kid !== undefined) out.kid = result.kid;
  return out;
}

/** One line per check (PASS, FAIL, ---- NOT PINNED, or WAIVED with its reason), then the verdict. */
export function formatChecks(checks: Check[]): string {
  const lines = checks.map((c) => `${checkMark(c)} ${c.name} — ${isNotPinned(c) ? 'NOT PINNED: ' : ''}${c.detail}${isWaived(c) ? ` (waived: ${c.waived})` : ''}`);
  const uncompared = checks.some((c) => c.name === 'reference.values' && (isNotPinned(c) || isWaived(c)));
  lines.push(verdictOf(checks).summary + (uncompared ? '; the code was not compared with reference values' : ''));
  return lines.join('\n') + '\n';
}

export function formatReport(r: VerifyReport): string {
  return formatChecks(r.checks);
}

/** `sigil verify` with its input and output given, so tests run it in-process. */
export async function verifyCommand(argv: string[], io: VerifyIo): Promise<number> {
  let o: Options;
  try {
    o = parseOptions(argv, io.env);
  } catch (err) {
    const message = (err as Error).message;
    if (message === '') {
      io.stdout.write(USAGE);
      return EXIT.ok;
    }
    io.stderr.write(`sigil verify: ${message}\n\n${USAGE}`);
    return EXIT.usage;
  }
  let r: VerifyReport;
  try {
    r = o.receipt !== undefined ? await verifyFile(o, io) : await verifyLive(o, io);
  } catch (err) {
    const code = isVerifyError(err) ? err.code : 'ERR_VERIFY_INTERNAL';
    let message = (err as Error).message;
    if (o.apiKey !== undefined && o.apiKey !== '') message = message.split(o.apiKey).join('[api key]');
    if (o.json) io.stdout.write(JSON.stringify({ ok: false, error: { code, message } }, null, 2) + '\n');
    else io.stderr.write(`sigil verify: could not verify: ${message}\n`);
    return EXIT.unavailable;
  }
  const ear = () => toEar(r.checks, { verifier: { developer: 'https://github.com/sigil', build: 'sigil verify' }, submod: o.url ?? o.receipt ?? 'receipt' });
  io.stdout.write(o.ear ? JSON.stringify(ear(), null, 2) + '\n' : o.json ? JSON.stringify(r, null, 2) + '\n' : formatReport(r));
  return r.ok ? EXIT.ok : EXIT.checkFailed;
}

export async function run(argv: string[]): Promise<number> {
  return verifyCommand(argv, { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env });
}
