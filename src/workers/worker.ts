/**
 * A worker process of `sigil serve` with `workers` > 1: it serves from what the primary made once
 * (keys, start evidence, measured state, catalogue), received over IPC, and shares the primary's
 * listening socket. It measures nothing itself; limits, receipts and EHBP replays are the primary's.
 */
import cluster from 'node:cluster';
import { Gauge } from 'prom-client';
import type { EvidenceSources } from '../attestation/document.ts';
import { createGpuCollector } from '../attestation/gpu/gpu-evidence.ts';
import { selectAttestationProvider } from '../attestation/select.ts';
import { KeyRing } from '../auth/bearer.ts';
import { readKeysFile } from '../auth/keys-file.ts';
import { ehbpServerKeyFrom } from '../ehbp/server-key.ts';
import type { AppContext } from '../http/context.ts';
import { assembleContext, drain, listen, newAppState, type Listening, type Serving } from '../http/start.ts';
import { createLogger } from '../logger/logger.ts';
import { createMetrics } from '../metrics/registry.ts';
import { observeUpstreams } from '../metrics/upstreams.ts';
import { closeUpstreams, createUpstreams } from '../proxy/upstream.ts';
import { signingKeyFromPkcs8 } from '../receipts/signing-key.ts';
import type { TlsCredentials } from '../tls/credentials.ts';
import type { ServedTls } from '../tls/provision.ts';
import type { FleetHealth } from '../fleet/connection.ts';
import { FleetKeyRing } from '../fleet/revocations.ts';
import type { Jwks } from '../protocol/attestation.ts';
import { isWorkerMessage, type Handoff, type ReloadedParts, type ToPrimary, type ToWorker } from './messages.ts';
import { PrimaryAdmission, PrimaryChannel, PrimaryLog, PrimaryReceiptStore, PrimaryReplayWindow } from './shared-state.ts';
import { LeasedBudget } from './leased-budget.ts';

function handoffReceived(): Promise<Handoff> {
  return new Promise((resolve) => {
    const onMessage = (m: unknown) => {
      if (!isWorkerMessage(m) || m.type !== 'sigil:handoff') return;
      process.off('message', onMessage);
      resolve(m);
    };
    process.on('message', onMessage);
    const waiting: ToPrimary = { type: 'sigil:waiting' };
    process.send!(waiting);
  });
}

/** TLS with the primary's key and certificate; a renewal the primary made arrives as a message. */
function servedTls(given: NonNullable<Handoff['tls']>): ServedTls & { renew(credentials: TlsCredentials): void } {
  const listeners: Array<(credentials: TlsCredentials) => void> = [];
  let current = given.credentials;
  return {
    mode: given.mode,
    keyOrigin: given.keyOrigin,
    get current() {
      return current;
    },
    onRenewed: (listener) => listeners.push(listener),
    renew: (credentials) => {
      current = credentials;
      for (const listener of listeners) listener(credentials);
    },
    close: async () => undefined,
  };
}

async function contextFrom(handoff: Handoff, channel: PrimaryChannel, views: FleetViews): Promise<AppContext> {
  const { config } = handoff;
  const logger = createLogger(config.log.level, undefined, config.log.format).child({ worker: handoff.workerId });
  const upstreams = createUpstreams(config.upstreams);
  const metrics = createMetrics();
  observeUpstreams(metrics, upstreams);
  new Gauge({
    name: 'sigil_worker_info',
    help: 'Always 1; the label is the worker process that answered this scrape.',
    labelNames: ['worker'],
    registers: [metrics.registry],
  }).set({ worker: String(handoff.workerId) }, 1);
  // A scrape reaching this worker answers for the whole server: the primary gathers every worker's registry.
  metrics.scrape = () => channel.call({ op: 'metrics.scrape' });
  const signingKey = await signingKeyFromPkcs8(handoff.signingKey.pkcs8, handoff.signingKey.origin, handoff.signingKey.file);
  // Fresh (nonce'd) evidence is collected here; the measured parts (event log, manifest) are the primary's.
  const { provider } = await selectAttestationProvider({ provider: config.attestation.provider, tsmPath: config.attestation.tsm_path });
  const gpus = createGpuCollector({ mode: config.attestation.gpu, nvmlLibrary: config.attestation.nvml_library, logger });
  const sources: EvidenceSources = {
    provider,
    collectGpuEvidence: gpus.collect,
    eventLog: handoff.eventLog,
    manifestSha384: handoff.manifestSha384,
    keyOrigin: handoff.keyOrigin,
  };
  const ehbp =
    handoff.ehbp === undefined
      ? undefined
      : {
          key: await ehbpServerKeyFrom(handoff.ehbp.privateKey, handoff.ehbp.keyConfig),
          keyConfig: Buffer.from(handoff.ehbp.keyConfig),
          replays: new PrimaryReplayWindow(channel),
        };
  return assembleContext({
    config,
    logger,
    metrics,
    // In fleet mode a key the fleet revoked is refused here too: the primary passes each revocation on.
    keyRing:
      handoff.fleet === undefined ? new KeyRing(readKeysFile(config.auth.keys_file)) : new FleetKeyRing(readKeysFile(config.auth.keys_file), views.revoked),
    admission: new PrimaryAdmission(channel),
    catalogue: handoff.catalogue,
    upstreams,
    signingKey,
    receiptStore: new PrimaryReceiptStore(channel),
    receiptContext: handoff.receiptContext,
    jwks: views.jwks,
    documents: { ...handoff.documents, jwks: JSON.stringify(views.jwks) },
    attestation: {
      sources,
      tlsSpkiSha256: handoff.tlsSpkiSha256,
      hpkeKeyConfig: handoff.hpkeKeyConfig,
      start: handoff.start,
      ...(handoff.transparencyLog === undefined ? {} : { transparencyLog: handoff.transparencyLog }),
    },
    ...(ehbp === undefined ? {} : { ehbp }),
    // The log's sequencer is the primary's: this worker's receipts are appended there, and /v1/log/ is read from it.
    ...(handoff.transparencyLog === undefined ? {} : { transparencyLog: new PrimaryLog(channel) }),
    ...(handoff.fleet === undefined ? {} : { fleet: { replicaId: handoff.fleet.replicaId, health: () => views.health } }),
  });
}

/** What the primary's fleet connection sees, kept current here by its messages (they may arrive before this worker serves). */
interface FleetViews {
  revoked: Set<string>;
  health: FleetHealth;
  jwks: Jwks;
}

function applyFleetMessage(views: FleetViews, message: ToWorker, serving: Serving | undefined): void {
  if (message.type === 'sigil:revoked') views.revoked.add(message.keyHash);
  else if (message.type === 'sigil:fleet-health') views.health = message.health;
  else if (message.type === 'sigil:jwks') {
    views.jwks = message.jwks;
    if (serving !== undefined) {
      const now = serving.state.ctx;
      serving.state.ctx = { ...now, jwks: message.jwks, documents: { ...now.documents, jwks: JSON.stringify(message.jwks) } };
    }
  }
}

/** Swaps in what the primary reloaded and measured; the keys file is re-read here. */
function applyReload(serving: Serving, parts: ReloadedParts): void {
  const now = serving.state.ctx;
  try {
    now.keyRing.replace(readKeysFile(now.config.auth.keys_file));
  } catch (err) {
    now.logger.error({ err: (err as Error).message }, 'keys file not reloaded; the previous keys stay in use');
  }
  now.attestation.sources.eventLog = parts.eventLog;
  now.attestation.sources.manifestSha384 = parts.manifestSha384;
  serving.state.ctx = {
    ...now,
    catalogue: parts.catalogue,
    receiptContext: parts.receiptContext,
    attestation: { ...now.attestation, start: parts.start },
    documents: { ...now.documents, ...parts.documents },
  };
  now.logger.info('worker applied the reload');
}

/** This worker's registry, for the primary's scrape of the whole server. */
async function answerMetrics(ctx: AppContext, id: number): Promise<void> {
  const answer: ToPrimary = { type: 'sigil:metrics', id, metrics: await ctx.metrics.registry.getMetricsAsJSON() };
  if (process.connected) process.send!(answer);
}

export async function runWorker(): Promise<number> {
  // Ctrl-C and SIGHUP reach the whole process group: the primary alone decides what they do.
  process.on('SIGINT', () => undefined);
  process.on('SIGHUP', () => undefined);
  const channel = new PrimaryChannel();
  const handoff = await handoffReceived();
  const views: FleetViews = { revoked: new Set(handoff.fleet?.revoked), health: handoff.fleet?.health ?? 'up', jwks: handoff.jwks };
  let serving: Serving | undefined;
  const onFleet = (m: unknown) => {
    if (isWorkerMessage(m)) applyFleetMessage(views, m, serving);
  };
  process.on('message', onFleet);
  const ctx = await contextFrom(handoff, channel, views);
  const tls = handoff.tls === undefined ? undefined : servedTls(handoff.tls);
  serving = { state: newAppState(ctx, new LeasedBudget(channel, ctx.config.limits.buffer_budget_bytes)), tls };
  const listening: Listening = await listen(serving, false);
  ctx.logger.info({ url: listening.url, pid: process.pid }, 'worker listening');
  const ready: ToPrimary = { type: 'sigil:listening', url: listening.url };
  process.send!(ready);

  const served = serving;
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = async (graceMs: number, drainMs: number) => {
      if (stopping) return;
      stopping = true;
      await drain(served, listening, graceMs, drainMs);
      await closeUpstreams(served.state.ctx.upstreams);
      await served.state.ctx.tracing?.close();
      // The IPC channel keeps the process alive: closed, the worker exits on its own once drained (not killed by the primary's deadline).
      if (process.connected) process.disconnect();
      resolve(0);
    };
    process.on('message', (m: unknown) => {
      if (!isWorkerMessage(m)) return;
      const message: ToWorker = m;
      if (message.type === 'sigil:reload') applyReload(served, message);
      else if (message.type === 'sigil:tls') tls?.renew(message.credentials);
      else if (message.type === 'sigil:metrics-request') void answerMetrics(ctx, message.id);
      else if (message.type === 'sigil:drain') void stop(message.graceMs, message.drainMs);
    });
    // The primary is gone (it crashed): finish what is in flight briefly, then go.
    cluster.worker?.on('disconnect', () => void stop(1000, 0));
  });
}
