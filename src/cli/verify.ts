import { randomBytes } from 'node:crypto';
import { NO_LOG_NOTE, NO_LOG_SHORT } from '../verify/tlog/no-log.ts';
import { NO_OHTTP_NOTE, NO_OHTTP_SHORT } from '../verify/ohttp-key.ts';
import { readFile } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import type { GpuTrustRoots } from '../verify/gpu/index.ts';
import { readReferenceValues } from '../verify/reference/load.ts';
import { readCollateralDirectory, type CollateralBundle } from '../verify/evidence/collateral/bundle.ts';
import { ReferenceValuesError, type ReferenceValues } from '../verify/reference/reference-values.ts';
import type { TrustRoots } from '../verify/attestation.ts';
import { field } from '../verify/binding.ts';
import { fail, isNotPinned, pass, verdictOf, waive, type Check, type VerdictOutcome } from '../verify/check.ts';
import type { ReceiptClaims } from '../verify/claims.ts';
import { canonicalPolicyHash } from '../verify/digest.ts';
import { VerifyError, isVerifyError } from '../verify/errors.ts';
import { toEar } from '../verify/ear.ts';
import { verifyExchange, type ReceiptContext, type ServiceExchange } from '../verify/exchange.ts';
import { firstListedModel, LIVE_API_PATHS, sendChatWithReceipt, type LiveApi, type LiveExchange } from '../verify/live-request.ts';
import { fetchJwks, fetchServiceEvidence } from '../verify/service.ts';
import { pinnedAgent, SpkiPin } from '../verify/tls-pin.ts';
import { verifyService, type ServiceEvidence, type ServiceExpectations, type ServiceVerification, type Waivers } from '../verify/verify-service.ts';
import type { TransparencyLogBinding } from '../protocol/attestation.ts';
import { InclusionWatch, serviceLog } from '../verify/tlog/receipt-inclusion.ts';
import { fetch as undiciFetch, type Dispatcher } from 'undici';
import { ReleaseError } from '../verify/release/errors.ts';
import { verifyReleaseReference } from '../verify/release/release-reference.ts';
import { formatChecks, verdictLine } from './check-report.ts';
import { RELEASE_TRUST_OPTIONS, releaseTrustFrom, releaseUsageProblem } from './release-trust.ts';
import { UsageError } from './cli-errors.ts';
import { parseCommandLine, refuseUsage, type CommandLine, type CommandSpec } from './command-line.ts';
import { isSigilError } from '../protocol/sigil-error.ts';
import { readAuditDirectory, type AuditedAttestation } from '../connect/audit.ts';

/** Exit statuses: 0 every check passed; 1 a check failed; 2 bad usage; 3 the verification could not be carried out. */
export const EXIT = { ok: 0, checkFailed: 1, usage: 2, unavailable: 3 } as const;

export const command = {
  name: 'verify',
  summary: `Verifies a Sigil receipt (docs/receipts.md) and, with --url, the attestation evidence binding its key (docs/attestation.md).
With RECEIPT_FILE (or - for stdin), checks a receipt you kept; with --url BASE alone, makes a live chat completion with a
fresh nonce and checks everything about it; with --audit DIR, checks again what sigil connect kept. It prints one line,
the verdict with its counts; with -v, every check first, as "PASS name — detail" or "FAIL name — detail".`,
  operands: [['[RECEIPT_FILE]', 'a receipt you kept, or - for stdin']],
  options: {
    jwks: { type: 'string', value: 'FILE|URL', description: 'the JWKS to verify against (default with --url: BASE/v1/verify/jwks.json)' },
    url: { type: 'string', value: 'BASE', description: 'the service; fetches its JWKS, policy and fresh attestation evidence' },
    'api-key': { type: 'string', value: 'KEY', description: 'live mode; or set SIGIL_API_KEY (never printed)' },
    model: { type: 'string', value: 'ID', description: 'live mode: the model to ask (default: the first one GET /v1/models lists)' },
    stream: {
      type: 'boolean',
      description: 'live mode: stream the answer and check the message receipt after [DONE] (messages: message_stop)',
      default: false,
    },
    api: {
      type: 'string',
      value: 'chat|messages',
      description:
        "the API of the exchange: OpenAI's chat completions or Anthropic's Messages API (POST /v1/messages); live mode asks it, a receipt file is checked as signed for it (live mode checks the receipts are in the service's transparency log, when its attestation binds one)",
      default: 'chat',
    },
    log: {
      type: 'boolean',
      description:
        "with a receipt file and --url: check the receipt is in the transparency log the attestation binds (docs/log.md), waiting up to the log's maximum merge delay for its batch",
      default: false,
    },
    'log-index': {
      type: 'string',
      value: 'N',
      description: 'its leaf index (X-<Brand>-Log-Index, or sealed after the receipt); default: found by receipt id',
    },
    nonce: { type: 'string', value: 'TEXT', description: 'the X-<Brand>-Nonce you sent (default: none, so the receipt must carry "")' },
    measurement: { type: 'string', value: 'HEX', description: 'the enclave measurement you expect (from a reproducible build)' },
    policy: { type: 'string', value: 'FILE', description: 'the policy document you expect (default with --url: BASE/v1/verify/policy)' },
    attestation: {
      type: 'string',
      value: 'FILE',
      description:
        'offline: a saved attestation document, best the start evidence (GET BASE/v1/verify/attestation without a nonce), which attestation_hash names',
    },
    request: { type: 'string', value: 'FILE', description: 'the exact request body you sent' },
    response: { type: 'string', value: 'FILE', description: 'the exact response body you received (streams: up to and including data: [DONE])' },
    reference: {
      type: 'string',
      value: 'FILE',
      description: 'reference values (docs/auditing.md): TDX/SNP values, and gpu.rims, the NVIDIA RIMs the GPU measurements must match',
    },
    release: {
      type: 'string',
      value: 'FILE',
      description:
        'a signed release manifest (Sigstore bundle, docs/release.md), verified offline; its values are reference values; --reference FILE may add what a release does not state (machine allow-lists, TCB floors, policy). Any failed release.* check makes the verdict NOT VERIFIED. Whom it must come from: --key, or --identity and --issuer, as sigil release verify',
    },
    ...RELEASE_TRUST_OPTIONS,
    collateral: {
      type: 'string',
      value: 'DIR',
      description:
        "a collateral bundle as \"sigil collateral fetch\" writes it (file names in docs/auditing.md), verified offline: Intel's TCB info, QE identity and CRLs for TDX evidence (Intel's TCB status of the platform); AMD's CRL for SEV-SNP evidence (snp.crl, instead of the certificate table's); NVIDIA's RIMs and OCSP answers for GPU evidence (nvidia-collateral.json)",
    },
    brand: { type: 'string', value: 'NAME', description: 'the brand word of the header names (Service: X-Service-Receipt)', default: 'Service' },
    'allow-no-tee': {
      type: 'boolean',
      description: 'accept tee "none" (a development server without hardware evidence): its checks print as WAIVED, never PASS',
      default: false,
    },
    'allow-unpinned-code': {
      type: 'boolean',
      description:
        'accept measured values no reference value pins: they print as WAIVED; without it they print as ---- NOT PINNED and the verdict is NOT VERIFIED',
      default: false,
    },
    audit: {
      type: 'string',
      value: 'DIR',
      description:
        'offline: every receipt sigil connect --audit-dir DIR kept, checked again with the evidence it was verified against (docs/connect.md, "Audit"); one section per attestation',
    },
    verbose: {
      type: 'boolean',
      short: 'v',
      description: 'print every check under its heading, then the verdict (default: the verdict line only)',
      default: false,
    },
    json: { type: 'boolean', description: 'print a machine-readable report (same as --format json)', default: false },
    format: {
      type: 'string',
      value: 'text|json|ear',
      description: 'ear: print the verdict as an IETF RATS EAR claims set (JSON, unsigned; docs/auditing.md)',
    },
  },
  notes: `Exit status: 0 verified (or verified with waivers, each listed), 1 not verified (a check failed or a
value is not pinned), 2 bad usage, 3 could not verify (I/O, network).`,
} as const satisfies CommandSpec;

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
  /** --api: the exchange's API, chat completions or the Messages API. */
  api: LiveApi;
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
  /** -v: every check, not only the verdict line. */
  verbose: boolean;
  /** --format ear: print the verdict as an IETF RATS EAR (JSON claims set). */
  ear: boolean;
  /** --audit DIR: the receipts sigil connect kept. */
  audit?: string;
  /** --log: check the kept receipt is in the transparency log the attestation binds (with --url). */
  log: boolean;
  /** --log-index N: its leaf index, when known (else it is found by receipt id). */
  logIndex?: number;
}

export interface VerifyReport {
  /** True for verified and verified-with-waivers. */
  ok: boolean;
  outcome: VerdictOutcome;
  mode: 'file' | 'live' | 'audit';
  checks: Check[];
  claims?: ReceiptClaims;
  /** RFC 7638 thumbprint of the key that verified the receipt. */
  kid?: string;
  /** What the user should know that no check decides (a service keeping no log), printed after the checks. */
  notes?: string[];
}

function parseOptions(line: CommandLine<typeof command.options>, env: VerifyIo['env']): Options {
  const { values: v, positionals } = line;
  if (positionals.length > 1) throw new UsageError('give one receipt file (or - for stdin)');
  if (v.api !== 'chat' && v.api !== 'messages') throw new UsageError('--api is chat or messages');
  if (v.format !== undefined && v.format !== 'text' && v.format !== 'json' && v.format !== 'ear') throw new UsageError('--format is text, json or ear');
  const releaseTrust = { key: v.key, identity: v.identity, issuer: v.issuer, 'trusted-root': v['trusted-root'] };
  const o: Options = {
    releaseTrust,
    stream: v.stream,
    api: v.api,
    brand: v.brand,
    allowNoTee: v['allow-no-tee'],
    allowUnpinnedCode: v['allow-unpinned-code'],
    json: v.json || v.format === 'json',
    verbose: v.verbose,
    ear: v.format === 'ear',
    log: v.log,
  };
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
  set('audit', v.audit);
  if (v['log-index'] !== undefined) {
    if (!/^\d{1,15}$/.test(v['log-index'])) throw new UsageError('--log-index is a leaf index (a whole number)');
    o.logIndex = Number(v['log-index']);
    o.log = true;
  }
  if ((o.log || o.logIndex !== undefined) && (o.receipt === undefined || o.url === undefined))
    throw new UsageError('--log and --log-index check a kept receipt file against the log of the service at --url BASE');
  releaseUsage(o);
  if (!/^[A-Za-z0-9-]+$/.test(o.brand)) throw new UsageError('--brand is one word of letters, digits and hyphens');
  if (o.measurement !== undefined && !/^(?:[0-9a-f]{2})+$/.test(o.measurement)) throw new UsageError('--measurement is hex');
  if (o.audit !== undefined) {
    if (o.receipt !== undefined || o.url !== undefined) throw new UsageError('--audit DIR is checked offline: no receipt file and no --url');
    for (const flag of ['jwks', 'nonce', 'policy', 'attestation', 'request', 'response', 'model', 'measurement'] as const) {
      if (o[flag] !== undefined) throw new UsageError(`--${flag} is not for --audit: the directory holds what each receipt needs`);
    }
    return o;
  }
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

/** Which flag gives what a receipt check needs. */
const CLI_HINTS: Record<string, string> = {
  'receipt.measurement': 'give --measurement HEX or --url BASE',
  'receipt.policy_hash': 'give --policy FILE or --url BASE',
  'receipt.request_hash': 'give --request FILE',
  'receipt.response_hash': 'give --response FILE',
};

interface LoadedReference {
  values: ReferenceValues;
  /** The text of each RIM the reference file names (gpu.rims). */
  rims?: string[];
  /** The recorded OCSP responses the reference file names (gpu.ocsp). */
  ocsp?: Array<{ label: string; der: Uint8Array }>;
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
  if (values.gpu?.ocsp !== undefined)
    loaded.ocsp = await Promise.all(values.gpu.ocsp.map(async (path) => ({ label: path, der: new Uint8Array(await readBytes(path, 'OCSP response')) })));
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
  const own = await loadReference(o.reference);
  try {
    const release = verifyReleaseReference(bundle, trust, own?.values, io.now ?? new Date());
    return { checks: release.checks, reference: release.values === undefined ? undefined : { ...own, values: release.values } };
  } catch (err) {
    if (err instanceof ReleaseError) throw new VerifyError('ERR_VERIFY_FETCH', `the trust root or key could not be used: ${err.message}`);
    if (err instanceof ReferenceValuesError) throw new VerifyError('ERR_VERIFY_FETCH', `reference values ${o.reference!}: ${err.message}`);
    throw err;
  }
}

/** The reference values of --reference FILE, --release FILE or both (the file adding what the release does not state), with the release's own checks. */
async function referenceFor(o: Options, io: VerifyIo): Promise<ReleaseResult> {
  if (o.release !== undefined) return loadRelease(o, io);
  return { checks: [], reference: await loadReference(o.reference) };
}

async function loadCollateral(dir: string): Promise<CollateralBundle> {
  try {
    return await readCollateralDirectory(dir);
  } catch (err) {
    throw new VerifyError(
      'ERR_VERIFY_FETCH',
      `cannot read the collateral bundle ${dir}: ${isSigilError(err) ? err.message : ((err as NodeJS.ErrnoException).code ?? (err as Error).message)}`,
    );
  }
}

/** A saved attestation document binds the nonce it was made for; the start evidence the all-zero one. */
function documentNonce(doc: unknown): Uint8Array {
  const nonce = field(doc, 'nonce');
  if (typeof nonce !== 'string' || !/^(?:[0-9a-fA-F]{2})*$/.test(nonce)) {
    throw new VerifyError('ERR_VERIFY_FETCH', 'the attestation document has no hex nonce');
  }
  return new Uint8Array(Buffer.from(nonce, 'hex'));
}

const ALLOW_NO_TEE = '--allow-no-tee: a development service without hardware';
const ALLOW_UNPINNED = '--allow-unpinned-code: values nobody pinned are accepted';

/** What the flags ask of the service: our nonce, the measurement and reference values, the trust roots and the waivers. */
function expectationsOf(o: Options, io: VerifyIo, nonce: Uint8Array, reference: LoadedReference | undefined): ServiceExpectations {
  const waive: Waivers = {};
  if (o.allowNoTee) waive.noHardwareEnclave = ALLOW_NO_TEE;
  if (o.allowUnpinnedCode) waive.unpinnedCode = ALLOW_UNPINNED;
  const expect: ServiceExpectations = { nonce, waive };
  if (o.measurement !== undefined) expect.measurement = o.measurement;
  if (reference !== undefined) expect.reference = reference.values;
  if (io.roots !== undefined) expect.roots = io.roots;
  if (io.gpuRoots !== undefined) expect.gpuRoots = io.gpuRoots;
  if (io.now !== undefined) expect.now = io.now;
  return expect;
}

/** The RIMs and the collateral bundle the flags name, added to what was fetched. */
async function addLocalEvidence(evidence: ServiceEvidence, o: Options, reference: LoadedReference | undefined): Promise<void> {
  if (reference?.rims !== undefined) evidence.rims = reference.rims;
  if (reference?.ocsp !== undefined) evidence.ocsp = reference.ocsp;
  if (o.collateral !== undefined) evidence.collateral = await loadCollateral(o.collateral);
}

/** A kept receipt as one exchange: the message receipt apart from the bytes it covers (streams: cut after data: [DONE]). */
async function keptExchange(o: Options, jws: string): Promise<ServiceExchange> {
  const exchange: ServiceExchange = { path: LIVE_API_PATHS[o.api], stream: false, nonce: o.nonce ?? '', receipt: jws };
  if (o.request !== undefined) exchange.request = await readBytes(o.request, 'request');
  if (o.response !== undefined) exchange.response = await readBytes(o.response, 'response');
  return exchange;
}

/** The library fails what it was not given (docs/receipts.md, "How to verify"); the CLI says which flag gives it. */
function withHints(checks: Check[]): Check[] {
  return checks.map((c) =>
    !c.ok && c.detail.startsWith('not checked:') && CLI_HINTS[c.name] !== undefined ? { ...c, detail: `not checked: ${CLI_HINTS[c.name]}` } : c,
  );
}

async function verifyFile(o: Options, io: VerifyIo): Promise<VerifyReport> {
  const text = o.receipt === '-' ? await readAll(io.stdin) : await readBytes(o.receipt!, 'receipt');
  const exchange = await keptExchange(o, text.toString('utf8').trim());
  const { checks: releaseChecks, reference } = await referenceFor(o, io);
  const policy = o.policy !== undefined ? await readJsonFile(o.policy, 'policy') : undefined;
  // Fresh evidence for our nonce, over a connection pinned to the key it presents; with --log, the log is read over it too.
  const pin = new SpkiPin();
  const dispatcher = o.url === undefined ? undefined : pinnedAgent(pin);
  try {
    return await verifyFileWith(o, io, exchange, releaseChecks, reference, policy, dispatcher === undefined ? undefined : { pin, dispatcher });
  } finally {
    await dispatcher?.close();
  }
}

async function verifyFileWith(
  o: Options,
  io: VerifyIo,
  exchange: ServiceExchange,
  releaseChecks: Check[],
  reference: LoadedReference | undefined,
  policy: unknown,
  connection: { pin: SpkiPin; dispatcher: Dispatcher } | undefined,
): Promise<VerifyReport> {
  let evidence: ServiceEvidence | undefined;
  let nonce: Uint8Array = randomBytes(32);
  if (connection !== undefined) {
    evidence = await fetchServiceEvidence(o.url!, nonce, connection.pin, connection.dispatcher);
  } else if (o.attestation !== undefined) {
    // A saved document, best the start evidence, which attestation_hash names; it was fetched earlier, over no connection we see.
    const doc = await readJsonFile(o.attestation, 'attestation document');
    nonce = documentNonce(doc);
    evidence = { attestation: doc, jwks: { keys: [] }, policy };
    if (/^(?:00)+$/.test(String(field(doc, 'nonce')))) evidence.startAttestation = doc;
  }
  const jwks = o.jwks !== undefined ? await loadJwks(o.jwks) : evidence?.jwks;
  if (evidence === undefined) return verifyReceiptAlone(o, exchange, jwks!, policy, releaseChecks);
  evidence.jwks = jwks!;
  if (policy !== undefined) evidence.policy = policy;
  evidence.exchanges = [exchange];
  await addLocalEvidence(evidence, o, reference);
  const expect = expectationsOf(o, io, nonce, reference);
  if (o.attestation !== undefined)
    expect.waive = {
      ...expect.waive,
      noConnection: 'offline: --attestation FILE was saved earlier, so no connection was made to compare its TLS key or HPKE key',
    };
  const result = await verifyService(evidence, expect);
  const logged =
    o.log && connection !== undefined
      ? await inclusionChecks(
          result.facts.transparencyLog,
          o.url!,
          [{ jws: exchange.receipt!, ...(o.logIndex === undefined ? {} : { index: o.logIndex }) }],
          connection.dispatcher,
        )
      : [];
  return reportOf('file', [...releaseChecks, ...withHints(result.checks), ...logged], result.exchanges[0] ?? {});
}

/** A kept receipt with no attestation document: its own checks, and the hardware evidence reported as not checked. */
async function verifyReceiptAlone(
  o: Options,
  exchange: ServiceExchange,
  jwks: { keys: unknown[] },
  policy: unknown,
  releaseChecks: Check[],
): Promise<VerifyReport> {
  const context: ReceiptContext = { jwks };
  if (o.measurement !== undefined) context.measurement = o.measurement;
  if (policy !== undefined) {
    context.policy = policy;
    context.policyHash = canonicalPolicyHash(policy);
  }
  if (o.allowNoTee) context.noHardwareEnclave = ALLOW_NO_TEE;
  const result = await verifyExchange(exchange, context);
  const checks = withHints(result.checks);
  if (result.claims !== undefined && result.claims.tee !== 'none')
    checks.push(fail('attestation.document', 'not checked: give --attestation FILE or --url BASE'));
  // Without evidence nothing is compared with the release, but a bad release still fails the verdict.
  return reportOf('file', [...checks, ...releaseChecks], result, o.allowUnpinnedCode);
}

async function verifyLive(o: Options, io: VerifyIo): Promise<VerifyReport> {
  const base = o.url!;
  const nonce = randomBytes(32);
  const { checks: releaseChecks, reference } = await referenceFor(o, io);
  // Attest first, over a connection pinned to the key it presents; the prompt goes only to that key.
  const pin = new SpkiPin();
  const dispatcher = pinnedAgent(pin);
  try {
    const evidence = await fetchServiceEvidence(base, nonce, pin, dispatcher);
    await addLocalEvidence(evidence, o, reference);
    const expect = expectationsOf(o, io, nonce, reference);
    const attested = await verifyService(evidence, expect);
    // A service that claims hardware, or any https one, gets no prompt over a connection the enclave does not
    // vouch for. A development service (tee "none") over plain HTTP is verified on, and fails on its lack of TEE.
    const development = attested.facts.tee === 'none' && new URL(base).protocol === 'http:';
    if (attested.facts.tlsSpkiSha256 === null && !development) {
      return reportOf(
        'live',
        [...releaseChecks, ...attested.checks, fail('live.request', 'not sent: the connection does not end in the attested enclave')],
        {},
      );
    }
    const model = o.model ?? (await firstListedModel(base, dispatcher));
    const live = await sendChatWithReceipt({
      baseUrl: base,
      apiKey: o.apiKey!,
      model,
      stream: o.stream,
      api: o.api,
      nonce: nonce.toString('hex'),
      brand: o.brand,
      dispatcher,
    });
    evidence.exchanges = [liveExchange(live, o.stream, nonce.toString('hex'), model, o.api)];
    const result = await verifyService(evidence, expect);
    const sent = pass(
      'live.request',
      `${o.stream ? 'streamed' : 'JSON'} ${o.api === 'messages' ? 'message (/v1/messages)' : 'completion'} from ${model}: ${live.requestBytes.length} request bytes, ` +
        `${live.responseBytes.length} response bytes, message receipt from the ${live.receiptSource}`,
    );
    const receiptChecks = result.exchanges[0]!.checks.length;
    const checks = [
      ...releaseChecks,
      ...result.checks.slice(0, result.checks.length - receiptChecks),
      sent,
      ...result.checks.slice(result.checks.length - receiptChecks),
      ...(await liveInclusion(base, result, live, dispatcher)),
    ];
    const report = reportOf('live', checks, result.exchanges[0]!);
    const notes = [...(result.facts.transparencyLog === null ? [NO_LOG_NOTE] : []), ...(result.facts.ohttpGateway === 'not offered' ? [NO_OHTTP_NOTE] : [])];
    if (notes.length > 0) report.notes = notes;
    return report;
  } finally {
    await dispatcher.close();
  }
}

/**
 * Receipts' place in the log the attestation binds (docs/log.md, "Verifying"), once their batch is integrated: the
 * first one's checks (`log.checkpoint`, `log.consistency`, `log.inclusion`), then each other's `log.inclusion` as `log.<name>`.
 */
async function inclusionChecks(
  bound: TransparencyLogBinding | null,
  base: string,
  receipts: Array<{ jws: string; index?: number; name?: string }>,
  dispatcher: Dispatcher,
): Promise<Check[]> {
  if (bound === null) return [fail('log.inclusion', "the service's attestation names no transparency log, so no log can hold the receipt")];
  const fetchLog = ((url: string) => undiciFetch(url, { dispatcher })) as unknown as typeof fetch;
  const watch = new InclusionWatch({ log: async () => serviceLog(bound, base, fetchLog) });
  const checks: Check[] = [];
  for (const [i, r] of receipts.entries()) {
    const verdict = await watch.check(r.jws, r.index);
    if (i === 0) checks.push(...verdict.checks);
    else checks.push({ ...(verdict.checks.find((c) => c.name === 'log.inclusion') ?? verdict.checks.at(-1)!), name: `log.${r.name!}` });
  }
  return checks;
}

/** The live receipts in the log: nothing for a service that keeps no log, or whose receipts already failed. */
async function liveInclusion(base: string, result: ServiceVerification, live: LiveExchange, dispatcher: Dispatcher): Promise<Check[]> {
  if (result.facts.transparencyLog === null || verdictOf(result.exchanges[0]!.checks).outcome === 'not-verified') return [];
  const receipts = [{ jws: live.receipt }, ...(live.modelReceipt === undefined ? [] : [{ jws: live.modelReceipt, name: 'model_receipt_inclusion' }])];
  return inclusionChecks(result.facts.transparencyLog, base, receipts, dispatcher);
}

/**
 * `--audit DIR`: each attestation sigil connect kept, with the exchanges held to it, through the one core again, offline:
 * the evidence as fetched then (its connection's TLS keys and served HPKE key included), each receipt over the bytes kept.
 * Certificates and receipts are judged at the time of the last receipt kept for that attestation.
 */
async function verifyAudit(o: Options, io: VerifyIo): Promise<{ report: VerifyReport; text: string }> {
  const { checks: releaseChecks, reference } = await referenceFor(o, io);
  let kept: AuditedAttestation[];
  try {
    kept = readAuditDirectory(o.audit!);
  } catch (err) {
    throw new VerifyError('ERR_VERIFY_FETCH', `cannot read the audit directory ${o.audit!}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  if (kept.length === 0) throw new VerifyError('ERR_VERIFY_FETCH', `the audit directory ${o.audit!} holds no attestation`);
  const all: Check[] = [...releaseChecks];
  let text = releaseChecks.length > 0 ? formatChecks(releaseChecks) : '';
  let receipts = 0;
  for (const attestation of kept) {
    const evidence = { ...attestation.evidence, exchanges: attestation.receipts.map((r) => r.exchange) };
    await addLocalEvidence(evidence, o, reference);
    const expect = expectationsOf(o, io, attestation.nonce, reference);
    const last = attestation.receipts.at(-1)?.at ?? attestation.at;
    expect.now = io.now ?? last;
    const result = await verifyService(evidence, expect);
    const own = result.checks.length - result.exchanges.reduce((n, x) => n + x.checks.length, 0);
    text += `== ${attestation.file}: ${attestation.service}, attested ${attestation.at.toISOString()}, ${attestation.receipts.length} receipt(s)
`;
    text += formatChecks(result.checks.slice(0, own));
    let at = own;
    attestation.receipts.forEach((r, i) => {
      const checks = result.checks.slice(at, at + result.exchanges[i]!.checks.length);
      at += checks.length;
      text += `-- ${r.file} (${r.exchange.stream ? 'stream' : 'JSON'} ${r.exchange.path}; connect said ${r.okThen ? 'verified' : 'NOT VERIFIED'})
${formatChecks(checks)}`;
    });
    receipts += attestation.receipts.length;
    all.push(...result.checks);
  }
  const report = reportOf('audit', all, {});
  text += `audit: ${kept.length} attestation(s), ${receipts} receipt(s): ${verdictOf(report.checks).summary}
`;
  return { report, text };
}

/** The live chat completion as the core reads an exchange: the message receipt already cut from the stream. */
function liveExchange(live: LiveExchange, stream: boolean, nonce: string, model: string, api: LiveApi): ServiceExchange {
  const exchange: ServiceExchange = {
    path: LIVE_API_PATHS[api],
    stream,
    nonce,
    model,
    request: live.requestBytes,
    response: live.responseBytes,
    receipt: live.receipt,
  };
  if (live.modelReceipt !== undefined) exchange.receiptHeader = live.modelReceipt;
  if (live.receiptId !== undefined) exchange.receiptId = live.receiptId;
  if (live.completionId !== undefined) exchange.completionId = live.completionId;
  return exchange;
}

function reportOf(mode: VerifyReport['mode'], found: Check[], result: { claims?: ReceiptClaims; kid?: string }, allowUnpinnedCode = false): VerifyReport {
  const checks = allowUnpinnedCode ? found.map((c) => (isNotPinned(c) ? waive(c, ALLOW_UNPINNED) : c)) : found;
  const verdict = verdictOf(checks);
  const out: VerifyReport = { ok: verdict.outcome !== 'not-verified', outcome: verdict.outcome, mode, checks };
  if (result.claims !== undefined) out.claims = result.claims;
  if (result.kid !== undefined) out.kid = result.kid;
  return out;
}

export function formatReport(r: VerifyReport): string {
  const text = formatChecks(r.checks);
  if (r.notes === undefined) return text;
  // The notes go just above the verdict, which stays the last line.
  const verdictAt = text.lastIndexOf('\n', text.length - 2) + 1;
  return text.slice(0, verdictAt) + r.notes.map((note) => `note: ${note}\n`).join('') + text.slice(verdictAt);
}

const SHORT_NOTES = new Map([
  [NO_LOG_NOTE, NO_LOG_SHORT],
  [NO_OHTTP_NOTE, NO_OHTTP_SHORT],
]);

/** The notes said within the one-line verdict, in their short words. */
function shortNotes(notes: readonly string[]): string[] {
  return notes.flatMap((note) => SHORT_NOTES.get(note) ?? []);
}

/** `sigil verify` with its input and output given, so tests run it in-process. */
export async function verifyCommand(argv: string[], io: VerifyIo): Promise<number> {
  const line = parseCommandLine(command, argv, io);
  if (typeof line === 'number') return line;
  let o: Options;
  try {
    o = parseOptions(line, io.env);
  } catch (err) {
    return refuseUsage(command, (err as Error).message, io);
  }
  let r: VerifyReport;
  let auditText: string | undefined;
  try {
    if (o.audit !== undefined) ({ report: r, text: auditText } = await verifyAudit(o, io));
    else r = o.receipt !== undefined ? await verifyFile(o, io) : await verifyLive(o, io);
  } catch (err) {
    const code = isVerifyError(err) ? err.code : 'ERR_VERIFY_INTERNAL';
    let message = (err as Error).message;
    if (o.apiKey !== undefined && o.apiKey !== '') message = message.split(o.apiKey).join('[api key]');
    if (o.json) io.stdout.write(JSON.stringify({ ok: false, error: { code, message } }, null, 2) + '\n');
    else io.stderr.write(`sigil verify: could not verify: ${message}\n`);
    return EXIT.unavailable;
  }
  const ear = () => toEar(r.checks, { verifier: { developer: 'https://github.com/sigil', build: 'sigil verify' }, submod: o.url ?? o.receipt ?? 'receipt' });
  const text = () =>
    o.verbose
      ? (auditText ?? formatReport(r))
      : auditText === undefined
        ? verdictLine(r.checks, shortNotes(r.notes ?? []))
        : auditText.trimEnd().split('\n').at(-1)! + '\n';
  io.stdout.write(o.ear ? JSON.stringify(ear(), null, 2) + '\n' : o.json ? JSON.stringify(r, null, 2) + '\n' : text());
  return r.ok ? EXIT.ok : EXIT.checkFailed;
}

export async function run(argv: string[]): Promise<number> {
  return verifyCommand(argv, { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env });
}
