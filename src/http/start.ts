import { createPrivateKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { setMaxListeners } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { attestationHash, makeAttestationDocument, type EvidenceSources } from '../attestation/document.ts';
import { createGpuCollector } from '../attestation/gpu/gpu-evidence.ts';
import type { RtmrFs } from '../attestation/self-measurement.ts';
import { codeListings, runningCode } from '../attestation/manifest.ts';
import { measureStart, refuseUnmeasuredRuntime, type MeasuredState } from '../attestation/measured-state.ts';
import { currentRuntime, type ProcessRuntime } from '../attestation/runtime-options.ts';
import { measureWeights, type MeasuredModel } from '../catalogue/weights.ts';
import { START_NONCE, type Jwks, type KeyOrigin, type KeyOrigins } from '../protocol/attestation.ts';
import { selectAttestationProvider } from '../attestation/select.ts';
import type { AttestationProvider } from '../attestation/provider.ts';
import { KeyRing } from '../auth/bearer.ts';
import { readKeysFile } from '../auth/keys-file.ts';
import { buildCatalogue, loadCatalogue, type Catalogue } from '../catalogue/catalogue.ts';
import { ConfigError, type LoadedConfig } from '../config/load.ts';
import { plaintextOnTeeProblem } from '../policy/tee-requirements.ts';
import { createLogger, type Logger } from '../logger/logger.ts';
import { closeUpstreams, createUpstreams, type UpstreamSet } from '../proxy/upstream.ts';
import { createReceiptSigner, type SignReceipt } from '../receipts/signer.ts';
import { signsOnThreadPool } from '../config/workers.ts';
import type { ReceiptContext } from '../receipts/claims.ts';
import { createNonceSigner } from '../receipts/signed-nonce.ts';
import { loadSigningKey, receiptKeyOrigin, SEALED_KEY_MATERIAL_BYTES, sealedSigningKey, type SigningKey } from '../receipts/signing-key.ts';
import { sealedKeyMaterial, unsealSeed, type SealedSeed } from '../attestation/sealed-seed.ts';
import { MemoryReceiptStore } from '../receipts/store.ts';
import { MemoryReplayWindow } from '../limits/replay-window.ts';
import { startBuiltinEngine, type BuiltinEngine } from './builtin-engine.ts';
import { brandHeaders, type AppContext } from './context.ts';
import { ChatLimits } from '../limits/chat-limits.ts';
import { CountedAdmission, type ChatAdmission } from '../limits/admission.ts';
import { MemoryLimitCounters, type LimitCounters } from '../limits/counters.ts';
import { MemoryBudget, type Budget } from '../limits/memory-budget.ts';
import { InFlightRequests } from './in-flight.ts';
import { HttpError } from '../protocol/errors.ts';
import { joinFleet, type Fleet } from '../fleet/join.ts';
import { createMetrics, type SigilMetrics } from '../metrics/registry.ts';
import type { FleetStatus } from '../fleet/connection.ts';
import { observeUpstreams } from '../metrics/upstreams.ts';
import { createRequestTracing } from '../tracing/request-tracing.ts';
import { reloadFiles, watchFiles, type ReloadOutcome } from './reload.ts';
import { createSigilEvents, type SigilEvents } from './sigil-events.ts';
import { createHttpServer, type AppState } from './server.ts';
import { metricsAccess } from './routes/metrics.ts';
import type { TrustRoots } from '../verify/attestation.ts';
import { buildServedCatalogue, type ServedCatalogue } from './served-catalogue.ts';
import { provisionTls, type ServedTls } from '../tls/provision.ts';
import { makeEhbpServerKey } from '../ehbp/server-key.ts';
import { outsideVmProblem } from '../policy/upstreams.ts';
import { LogOriginMismatch, LogRolledBack, TransparencyLog } from '../tlog/transparency-log.ts';
import { ed25519FromSeed } from '../tlog/log-key.ts';
import { LogStateError } from '../tlog/signed-state.ts';
import { LogFolderBusy } from '../tlog/folder-lock.ts';
import { WitnessKeyError } from '../tlog/witness-push.ts';
import { StoredLogError } from '../tlog/tile-files.ts';
import type { ServedLog } from '../tlog/served-log.ts';
import { servedLocally } from './routes/transparency-log.ts';

export interface RunningSigil {
  url: string;
  state: AppState;
  /** Re-reads the keys file and catalogue (SIGHUP); resolves once both are swapped in or kept. */
  reload(): Promise<ReloadOutcome>;
  /** Tells when a reload is done (a change on disk included) and when the listener stops accepting. */
  events: SigilEvents;
  /**
   * Answers /readyz with 503 for `drainMs` while still serving (default 0 here; `sigil serve` passes
   * `limits.shutdown_drain_ms` on SIGTERM), stops accepting, lets requests in flight finish for up to
   * `graceMs` (default `limits.shutdown_grace_ms`), then ends what is left (a stream with one error
   * event) and stops the engine.
   */
  close(graceMs?: number, drainMs?: number): Promise<void>;
}

export interface StartOptions {
  logger?: Logger;
  /** Chooses the attestation provider; the default reads `attestation.provider` from the config. */
  attestationProvider?: AttestationProvider;
  /** The counters behind per-key limits, when not in fleet mode; the default keeps them in memory. */
  limitCounters?: LimitCounters;
  /** For tests: a stand-in for the TDX guest driver's measurement registers. */
  rtmrFs?: RtmrFs;
  /** The node options and environment measured and checked; default this process's. */
  runtime?: ProcessRuntime;
  /** For tests: a stand-in for the C library whose open/ioctl reach /dev/sev-guest (sealed keys). */
  sevGuestLibrary?: string;
  /** For tests: the AMD and Intel roots fleet peers' evidence must chain to, instead of the built-in ones. */
  trustRoots?: TrustRoots;
  /** Makes the HPKE private key exportable, for a primary that hands it to its workers in memory. */
  handOffKeys?: boolean;
  /** For tests: the clock of the windows and expiries kept here (per-key rate windows, the EHBP replay window, receipt retention); default `Date.now`. */
  now?: () => number;
}

/** What a listener serves: the live state and the TLS it ends, if any. */
export interface Serving {
  state: AppState;
  tls: ServedTls | undefined;
}

/** Everything built once from the configuration: keys, evidence, measured state, and the parts to close at the end. */
export interface SigilContext extends Serving {
  /** The counters behind per-key limits (in memory, or the fleet's in Redis): what workers share through the primary. */
  counters: LimitCounters;
  /** In fleet mode, the fleet this process joined (a workers' primary passes its views on). */
  fleet?: Fleet;
  /** The transparency log's sequencer, when `transparency_log` is set (a workers' primary appends its workers' entries to it). */
  transparencyLog?: TransparencyLog;
  /** Closes what the context opened: engine connections, TLS renewal, fleet, the built-in engine, tracing. */
  close(): Promise<void>;
}

export interface Listening {
  server: Server;
  url: string;
}

const LOOPBACK = /^(?:127(?:\.\d{1,3}){3}|::1|localhost)$/i;

async function chooseProvider(config: LoadedConfig, logger: Logger): Promise<AttestationProvider> {
  const { provider, warning } = await selectAttestationProvider({ provider: config.attestation.provider, tsmPath: config.attestation.tsm_path });
  // `auto` falling back to none is fine on a developer's loopback; on an address the network reaches it
  // would sign tee "none" receipts for real clients, so only an explicit `none` may do that (docs/decisions.md#hostile-peers).
  if (config.attestation.provider === 'auto' && provider.tee === 'none' && !LOOPBACK.test(config.listen.host)) {
    throw new ConfigError(
      `attestation.provider is auto, no TEE was found (${config.attestation.tsm_path}), and listen.host ${config.listen.host} is reachable from the network: ` +
        'refusing to sign receipts without hardware evidence. Run Sigil in a confidential VM, listen on 127.0.0.1, or set attestation.provider: none (development only).',
    );
  }
  if (warning !== undefined) logger.warn(warning);
  return provider;
}

/** Builds the context, listens, and returns the running service (one process; `sigil serve` with `workers` > 1 uses src/workers). */
export async function startSigil(configured: LoadedConfig, options: StartOptions = {}): Promise<RunningSigil> {
  const built = await buildContext(configured, options);
  let listening: Listening;
  try {
    listening = await listen(built);
  } catch (err) {
    await built.close();
    throw err;
  }
  const events = createSigilEvents();
  const reload = async () => {
    const outcome = await reloadFiles(built.state);
    events.emit('reloaded', outcome);
    return outcome;
  };
  const unwatch = watchFiles(built.state, reload);
  let closing: Promise<void> | undefined;
  const { config, logger } = built.state.ctx;
  return {
    url: listening.url,
    state: built.state,
    reload,
    events,
    close: (graceMs = config.limits.shutdown_grace_ms, drainMs = 0) =>
      (closing ??= (async () => {
        unwatch();
        await drain(built, listening, graceMs, drainMs, () => events.emit('listener-closed'));
        await built.close();
        logger.info({ url: listening.url }, 'sigil stopped');
      })()),
  };
}

/** Starts the built-in engine when no upstream is configured, then builds the context in front of it. */
export async function buildContext(configured: LoadedConfig, options: StartOptions = {}): Promise<SigilContext> {
  const logger = options.logger ?? createLogger(configured.log.level, undefined, configured.log.format);
  // The manifest's code listings are hashed while the engine starts and the weights are hashed (a failure shows when the manifest is made).
  codeListings(runningCode()).catch(() => undefined);
  const builtin = Object.keys(configured.upstreams).length === 0 ? await startBuiltinEngine(configured, logger) : undefined;
  const config = builtin?.config ?? configured;
  try {
    return await buildAroundEngine(config, logger, options, builtin);
  } catch (err) {
    await builtin?.stop();
    throw err;
  }
}

async function buildAroundEngine(config: LoadedConfig, logger: Logger, options: StartOptions, builtin: BuiltinEngine | undefined): Promise<SigilContext> {
  const upstreams = createUpstreams(config.upstreams);
  let catalogue: Catalogue;
  if (config.catalogue !== undefined) catalogue = loadCatalogue(config.catalogue, [...upstreams.keys()]);
  else if (builtin?.catalogue !== undefined) catalogue = buildCatalogue(builtin.catalogue, 'built-in engine', [...upstreams.keys()]);
  else throw new ConfigError('catalogue: give the path of the model catalogue');
  const models = await measureWeights(catalogue.models, (done, total, seconds) =>
    logger.info(
      { hashed_mb: Math.round(done / 1e6), total_mb: Math.round(total / 1e6), mb_per_s: Math.round(done / 1e6 / Math.max(seconds, 0.001)) },
      'hashing model weights',
    ),
  );
  const served = await buildServedCatalogue(catalogue, config, upstreams, logger);
  catalogue = served.catalogue;
  const keyRing = new KeyRing(readKeysFile(config.auth.keys_file));
  if (keyRing.size === 0) logger.warn({ keys_file: config.auth.keys_file }, 'no API keys: every chat request will be refused; add one with `sigil keys add`');

  const provider = options.attestationProvider ?? (await chooseProvider(config, logger));
  const sealed = unsealWhenAsked(config, provider, options.sevGuestLibrary);
  const signingKey =
    config.receipts.key_source === 'sealed'
      ? await sealedSigningKey(sealedKeyMaterial(sealed!, 'receipt', SEALED_KEY_MATERIAL_BYTES), sealed!.boundTo)
      : await loadSigningKey(config.receipts.key_file);
  const jwks: Jwks = { keys: [signingKey.publicJwk] };
  if (provider.tee !== 'none') refuseUnmeasuredRuntime(options.runtime ?? currentRuntime(), provider.tee);
  const plaintext = provider.tee === 'none' ? undefined : plaintextOnTeeProblem(config, provider.tee);
  if (plaintext !== undefined) throw new ConfigError(plaintext);
  if (provider.tee !== 'none') {
    for (const upstream of served.policy.upstreams) {
      const problem = outsideVmProblem(upstream);
      if (problem !== undefined) throw new ConfigError(problem);
    }
  }
  const tls = await provisionTls(config, logger);
  try {
    return await attest(config, logger, options, builtin, { catalogue, served, models, upstreams, keyRing, signingKey, jwks, provider, tls, sealed });
  } catch (err) {
    await tls?.close();
    throw err;
  }
}

interface Prepared {
  catalogue: Catalogue;
  served: ServedCatalogue;
  models: MeasuredModel[];
  upstreams: UpstreamSet;
  keyRing: KeyRing;
  signingKey: SigningKey;
  jwks: Jwks;
  provider: AttestationProvider;
  tls: ServedTls | undefined;
  sealed: SealedSeed | undefined;
}

/** The firmware-derived seed, when a key's `key_source` is sealed; only an SEV-SNP guest can derive one. */
function unsealWhenAsked(config: LoadedConfig, provider: AttestationProvider, library: string | undefined): SealedSeed | undefined {
  const asking = [
    config.receipts.key_source === 'sealed' ? 'receipts.key_source' : undefined,
    config.ehbp.enabled && config.ehbp.key_source === 'sealed' ? 'ehbp.key_source' : undefined,
    config.transparency_log?.key_source === 'sealed' ? 'transparency_log.key_source' : undefined,
  ].filter((name) => name !== undefined);
  if (asking.length === 0) return undefined;
  if (provider.tee !== 'sev-snp') {
    throw new ConfigError(
      `${asking.join(' and ')}: sealed keys are derived by the SEV-SNP firmware (${config.attestation.sealing.device}), and this machine's TEE is ${provider.tee}; use generated keys`,
    );
  }
  return unsealSeed(config.attestation.sealing, library);
}

/** Measures the start (on a TEE), makes the start evidence over the keys, joins the fleet, and assembles the context. */
async function attest(
  config: LoadedConfig,
  logger: Logger,
  options: StartOptions,
  builtin: BuiltinEngine | undefined,
  prepared: Prepared,
): Promise<SigilContext> {
  const { catalogue, served, models, upstreams, keyRing, signingKey, jwks, provider, tls, sealed } = prepared;
  const { policy, policyHash } = served;
  const gpus = createGpuCollector({ mode: config.attestation.gpu, nvmlLibrary: config.attestation.nvml_library, logger });
  // On a TEE, Sigil records its start event (on TDX, extends RTMR3) before the start evidence is made, so that evidence covers it.
  // Without hardware the manifest is computed too, so a development document reports it (vouched for by nothing: tee none).
  const measured = await measureStart({
    config,
    catalogueSha256: catalogue.sha256,
    runtime: options.runtime ?? currentRuntime(),
    tee: provider.tee,
    models,
    policyHash,
    logger,
    ...(options.rtmrFs === undefined ? {} : { rtmrFs: options.rtmrFs }),
  });
  const sealedHpke = config.ehbp.key_source === 'sealed' ? sealed : undefined;
  const ehbpKey = config.ehbp.enabled
    ? await makeEhbpServerKey(sealedHpke === undefined ? undefined : sealedKeyMaterial(sealedHpke, 'hpke', 32), options.handOffKeys === true)
    : undefined;
  const hpkeOrigin: KeyOrigins['hpke'] = sealedHpke === undefined ? { origin: 'generated' } : { origin: 'sealed', bound_to: sealedHpke.boundTo };
  const logKey = transparencyLogKey(config, sealed);
  const transparencyLog = await openTransparencyLog(config, logger, sealed, logKey?.privateKey);
  const keyOrigin: KeyOrigins = {
    receipt: receiptKeyOrigin(signingKey),
    tls: tls?.keyOrigin ?? null,
    hpke: ehbpKey === undefined ? null : hpkeOrigin,
    ...(transparencyLog === undefined ? {} : { log: logKey?.origin ?? { origin: 'generated' } }),
  };
  const sources: EvidenceSources = {
    provider,
    collectGpuEvidence: gpus.collect,
    eventLog: measured.state.events.eventLog(),
    manifestSha384: measured.manifestSha384,
    keyOrigin,
  };
  const keyConfig = ehbpKey === undefined ? undefined : Buffer.from(ehbpKey.keyConfig);
  const bound = {
    tlsSpkiSha256: tls?.current.spkiSha256 ?? null,
    hpkeKeyConfig: keyConfig?.toString('base64') ?? null,
    ...(transparencyLog === undefined ? {} : { transparencyLog: { origin: transparencyLog.origin, vkey: transparencyLog.key.vkey } }),
  };
  const { document: startDocument } = await makeAttestationDocument(sources, { jwks, policyHash, ...bound }, START_NONCE);
  const evidenceHash = attestationHash(startDocument);
  const receiptContext: ReceiptContext = {
    measurement: startDocument.measurement,
    tee: startDocument.tee,
    policyHash,
    ...(evidenceHash === undefined ? {} : { attestationHash: evidenceHash }),
  };
  // Fleet mode: keys, limits, receipts and the JWKS come from the fleet (Redis), with local fallbacks.
  // The fleet compares peers with the state in force and answers their nonces with evidence made now (deploy/README.md, "The JWKS").
  const now: { state?: AppState } = {};
  const manifest = () => measured.state.manifest;
  const fleet =
    config.fleet === undefined
      ? undefined
      : await joinFleet(config.fleet, config, {
          logger,
          now: options.now,
          signingKey,
          startDocument,
          manifest: manifest(),
          current: () => ({ doc: now.state?.ctx.attestation.start ?? startDocument, manifest: manifest() }),
          attest: async (nonce) => {
            const ctx = now.state?.ctx;
            const parts = {
              jwks,
              policyHash: ctx?.receiptContext.policyHash ?? policyHash,
              tlsSpkiSha256: ctx?.attestation.tlsSpkiSha256 ?? bound.tlsSpkiSha256,
              hpkeKeyConfig: bound.hpkeKeyConfig,
              ...(bound.transparencyLog === undefined ? {} : { transparencyLog: bound.transparencyLog }),
            };
            return { attestation: (await makeAttestationDocument(sources, parts, nonce)).document, manifest: manifest() };
          },
          ...(options.trustRoots === undefined ? {} : { roots: options.trustRoots }),
        });

  const metrics = createMetrics();
  observeUpstreams(metrics, upstreams);
  const counters = fleet?.counters ?? options.limitCounters ?? new MemoryLimitCounters(options.now);
  const ctx = assembleContext({
    now: options.now,
    config,
    logger,
    metrics,
    keyRing: fleet?.keyRing ?? keyRing,
    admission: new CountedAdmission(config.limits, counters),
    catalogue,
    upstreams,
    signingKey,
    receiptStore: fleet?.receiptStore ?? memoryReceiptStore(config, options.now),
    receiptContext,
    jwks: fleet?.jwks ?? jwks,
    documents: {
      jwks: JSON.stringify(fleet?.jwks ?? jwks),
      policy: JSON.stringify(policy),
      startEvidence: JSON.stringify(startDocument),
    },
    attestation: { sources, ...bound, start: startDocument },
    ...(ehbpKey === undefined
      ? {}
      : {
          ehbp: {
            key: ehbpKey,
            keyConfig: keyConfig!,
            replays:
              fleet?.replayWindow ??
              new MemoryReplayWindow({ windowS: config.ehbp.replay_window_s, maxEntries: config.ehbp.replay_max_entries, now: options.now }),
          },
        }),
    ...(fleet === undefined ? {} : { fleet: fleet.status }),
    measured: measured.state,
    ...(transparencyLog === undefined ? {} : { transparencyLog: servedLocally(transparencyLog) }),
  });
  transparencyLog?.start();
  const state = newAppState(ctx);
  now.state = state;
  fleet?.onJwks((view) => {
    state.ctx = { ...state.ctx, jwks: view, documents: { ...state.ctx.documents, jwks: JSON.stringify(view) } };
  });
  return {
    state,
    tls,
    counters,
    ...(fleet === undefined ? {} : { fleet }),
    ...(transparencyLog === undefined ? {} : { transparencyLog }),
    close: async () => {
      await transparencyLog?.close();
      await closeUpstreams(upstreams);
      await tls?.close();
      await fleet?.close();
      await builtin?.stop();
      await ctx.tracing?.close();
    },
  };
}

/** Opens (or creates) the transparency log when `transparency_log` is set; a stored log that does not hold together stops the start (docs/log.md#lost-or-corrupted). */
/**
 * The log's checkpoint key when it is to be the same across starts: sealed (derived from the sealed seed, the same while
 * the measured code is) or read from `key_file` (declared `loaded`, which verifiers on hardware refuse unless waived).
 * Undefined: a new key at this start, declared `generated`.
 */
function transparencyLogKey(config: LoadedConfig, sealed: SealedSeed | undefined): { privateKey: KeyObject; origin: KeyOrigin } | undefined {
  const settings = config.transparency_log;
  if (settings?.key_source === 'sealed')
    return { privateKey: ed25519FromSeed(sealedKeyMaterial(sealed!, 'log', 32)), origin: { origin: 'sealed', bound_to: sealed!.boundTo } };
  if (settings?.key_source !== 'file') return undefined;
  const file = settings.key_file!;
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(readFileSync(file));
  } catch (err) {
    throw new ConfigError(
      `transparency_log.key_file ${file}: not a readable private key (${(err as Error).message}); make one with: openssl genpkey -algorithm ed25519 -out ${file}`,
    );
  }
  if (privateKey.asymmetricKeyType !== 'ed25519')
    throw new ConfigError(`transparency_log.key_file ${file}: a log key is Ed25519 (C2SP signed-note), not ${privateKey.asymmetricKeyType ?? 'unknown'}`);
  return { privateKey, origin: { origin: 'loaded', file } };
}

/**
 * The log's origin as configured: `transparency_log.origin`, else its URL prefix without the scheme (as tlog-tiles
 * recommends) where Sigil knows its public name (ACME's first hostname); undefined: a random one for a new folder.
 */
export function configuredLogOrigin(config: LoadedConfig): string | undefined {
  if (config.transparency_log?.origin !== undefined) return config.transparency_log.origin;
  return config.tls.mode === 'acme' && config.tls.hostnames[0] !== undefined ? `${config.tls.hostnames[0]}/v1/log` : undefined;
}

async function openTransparencyLog(
  config: LoadedConfig,
  logger: Logger,
  sealed: SealedSeed | undefined,
  privateKey: KeyObject | undefined,
): Promise<TransparencyLog | undefined> {
  const settings = config.transparency_log;
  if (settings === undefined) return undefined;
  const origin = configuredLogOrigin(config);
  try {
    return await TransparencyLog.open({
      dir: settings.dir,
      ...(origin === undefined ? {} : { origin }),
      ...(privateKey === undefined ? {} : { privateKey }),
      ...(settings.state === undefined ? {} : { statePath: settings.state }),
      ...(sealed === undefined ? {} : { stateKey: sealedKeyMaterial(sealed, 'log-state', 32) }),
      originPrefix: settings.origin_prefix,
      batchMs: settings.batch_ms,
      idsKept: settings.ids_kept,
      logger,
      witnesses: {
        targets: settings.witnesses,
        quorum: settings.witness_quorum ?? settings.witnesses.length,
        timeoutMs: settings.witness_timeout_ms,
      },
    });
  } catch (err) {
    if (err instanceof LogFolderBusy) throw new LogFolderBusy(`transparency_log: ${err.message} (docs/log.md#on-disk)`, { cause: err });
    if (err instanceof LogOriginMismatch) throw new LogOriginMismatch(`transparency_log: ${err.message} (docs/log.md#identity)`, { cause: err });
    if (err instanceof LogRolledBack) throw new LogRolledBack(`transparency_log: ${err.message} (docs/log.md#rollback)`, { cause: err });
    if (err instanceof LogStateError) throw new LogStateError(`transparency_log: ${err.message} (docs/log.md#rollback)`, { cause: err });
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOSPC' || code === 'EROFS' || code === 'EACCES' || code === 'EPERM' || code === 'EDQUOT')
      throw new ConfigError(
        `transparency_log: cannot write the log folder ${settings.dir} (${code}: ${(err as Error).message}). ` +
          'Free space or make it writable, then start again: the log on disk is as the last run left it, and the next start extends it (docs/log.md#faults).',
      );
    if (err instanceof WitnessKeyError) throw new WitnessKeyError(`transparency_log.witnesses: ${err.message} (docs/log.md#witnesses)`, { cause: err });
    throw new StoredLogError(
      `transparency_log: the stored log in ${settings.dir} does not hold together, so Sigil will not extend it: ${(err as Error).message}. ` +
        'Keep the folder for the auditors, and start a new log (a new origin) in an empty folder (docs/log.md#lost-or-corrupted).',
      { cause: err },
    );
  }
}

/** What a serving process brings to its context: made here, or handed over by the primary (src/workers). */
export interface ContextParts {
  config: LoadedConfig;
  logger: Logger;
  metrics: SigilMetrics;
  keyRing: KeyRing;
  /** What chat limits count on: this process's counters (in memory, or the fleet's in Redis), or the primary's over IPC. */
  admission: ChatAdmission;
  catalogue: Catalogue;
  upstreams: UpstreamSet;
  signingKey: SigningKey;
  receiptStore: AppContext['receiptStore'];
  receiptContext: ReceiptContext;
  jwks: Jwks;
  documents: AppContext['documents'];
  attestation: AppContext['attestation'];
  ehbp?: Pick<NonNullable<AppContext['ehbp']>, 'key' | 'keyConfig' | 'replays'>;
  /** In fleet mode: whether the shared state in Redis is reachable. */
  fleet?: FleetStatus;
  /** The runtime events and what a reload measures (the primary's, with or without hardware; a worker has none). */
  measured?: MeasuredState;
  /** The transparency log (docs/log.md): this process's own, or the primary's for a worker. */
  transparencyLog?: ServedLog;
  /** For tests: the clock the rate-limit headers count from; default `Date.now`. */
  now?: () => number;
}

/**
 * The one place a serving context is put together, in a single process and in each worker alike: what is derived
 * from the configuration and the keys (header names, limits, the receipt and nonce signers, tracing, EHBP settings)
 * is derived here, so the two cannot drift apart.
 */
export function assembleContext(parts: ContextParts): AppContext {
  const { config, metrics, signingKey, admission, ehbp, now, ...rest } = parts;
  const tracing = createRequestTracing(config.tracing);
  return {
    ...rest,
    config,
    metrics,
    signingKey,
    headers: brandHeaders(config.brand),
    limits: new ChatLimits(config.limits, admission, now),
    signReceipt: countedSigner(signingKey, metrics, signsOnThreadPool(config)),
    signNonce: createNonceSigner(signingKey),
    ...(tracing === undefined ? {} : { tracing }),
    ...(ehbp === undefined ? {} : { ehbp: { ...ehbp, required: config.ehbp.required, maxBodyBytes: config.limits.max_body_bytes } }),
  };
}

/** The receipt store of one process: in memory, bounded by `receipts.*`. */
export function memoryReceiptStore(config: LoadedConfig, now?: () => number): MemoryReceiptStore {
  return new MemoryReceiptStore({
    retentionS: config.receipts.retention_s,
    maxEntries: config.receipts.max_stored,
    maxPerKey: config.receipts.max_stored_per_key,
    now,
  });
}

/** Signs receipts with `signingKey`, counting each in `sigil_receipts_signed_total`. */
export function countedSigner(signingKey: SigningKey, metrics: SigilMetrics, onThreadPool: boolean): SignReceipt {
  const sign = createReceiptSigner(signingKey, onThreadPool);
  return (claims) => {
    metrics.receiptsSigned.inc({ type: claims.receipt_type });
    return sign(claims);
  };
}

export function newAppState(ctx: AppContext, buffers: Budget = new MemoryBudget(ctx.config.limits.buffer_budget_bytes)): AppState {
  const streamsCut = new AbortController();
  // Every open stream listens for the cut (and stops listening when it ends): many at once is the design, not a leak.
  setMaxListeners(0, streamsCut.signal);
  return {
    ctx,
    inFlight: new InFlightRequests(),
    draining: false,
    buffers,
    streamsCut,
  };
}

/** Opens the server on `listen.host`/`listen.port` (in a cluster worker: the primary's shared socket); `announce` logs the URL. */
export async function listen(serving: Serving, announce = true): Promise<Listening> {
  const { state, tls } = serving;
  const { config, logger, signingKey, attestation, receiptContext, catalogue } = state.ctx;
  const server = createHttpServer(state, tls);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.listen.port, config.listen.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = config.listen.host.includes(':') ? `[${config.listen.host}]` : config.listen.host;
  const url = `${tls === undefined ? 'http' : 'https'}://${host}:${port}`;
  if (announce)
    logger.info(
      {
        url,
        tls: tls?.mode ?? 'off',
        tls_spki_sha256: attestation.tlsSpkiSha256,
        kid: signingKey.kid,
        key_origin: signingKey.origin,
        tee: attestation.start.tee,
        policy_hash: receiptContext.policyHash,
        models: catalogue.models.length,
        metrics: metricsAccess(config.metrics, process.env),
      },
      'sigil listening',
    );
  return { server, url };
}

/** How long streams cut at the end of the grace get to send their error event before every connection is closed. */
const CUT_STREAMS_MS = 500;

/**
 * Stops a listener gracefully: /readyz answers 503 for `drainMs`, the server stops accepting, requests in
 * flight get `graceMs` to finish, then what is left is cut (a stream ends with one error event).
 * `stoppedAccepting` is called as soon as a new connection is refused.
 */
export async function drain(serving: Serving, listening: Listening, graceMs: number, drainMs: number, stoppedAccepting?: () => void): Promise<void> {
  const { state } = serving;
  const { server } = listening;
  const { logger } = state.ctx;
  state.draining = true;
  if (drainMs > 0) {
    logger.info({ drain_ms: drainMs }, 'shutting down: /readyz answers 503 while load balancers move on');
    await new Promise((r) => setTimeout(r, drainMs));
  }
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  stoppedAccepting?.();
  server.closeIdleConnections();
  const waiting = state.inFlight.count;
  logger.info(
    { in_flight: waiting, grace_ms: graceMs },
    waiting === 0 ? 'shutting down: no request in flight' : `shutting down: waiting up to ${graceMs} ms for ${waiting} request(s) in flight to finish`,
  );
  if (!(await state.inFlight.settled(graceMs))) {
    logger.warn({ in_flight: state.inFlight.count }, 'shutdown grace period over: cutting the remaining requests');
    state.streamsCut.abort(new HttpError('not_ready', 'Sigil is shutting down: this stream was cut when the shutdown grace period ended; retry the request.'));
    // The cut streams' error events leave before their connections close (briefly: other requests may still hang on an engine).
    await state.inFlight.settled(CUT_STREAMS_MS);
  }
  server.closeAllConnections();
  await closed;
}
