/**
 * The primary of `sigil serve` with `workers` > 1. It builds everything secret and measured once
 * (receipt, TLS and HPKE keys in memory, the start evidence, the self-measurement), forks the workers
 * (node:cluster: one listening socket, connections spread over the workers) and hands each the keys
 * over IPC. It holds the limits, the receipt store and the EHBP replay window for all of them, runs
 * reloads (and their measurement) and passes the result on, drains every worker on SIGTERM, and
 * replaces a worker that dies.
 */
import cluster, { type Worker } from 'node:cluster';
import type { LoadedConfig } from '../config/load.ts';
import { exportEhbpPrivateKey } from '../ehbp/server-key.ts';
import type { AppContext } from '../http/context.ts';
import { reloadFiles, watchFiles } from '../http/reload.ts';
import { buildContext, type SigilContext } from '../http/start.ts';
import { metricsAccess } from '../http/routes/metrics.ts';
import { createLogger } from '../logger/logger.ts';
import type { Handoff, ReloadedParts, ToPrimary, ToWorker } from './messages.ts';
import { answerWorker, type SharedState } from './shared-state.ts';
import { CountedAdmission } from '../limits/admission.ts';
import { MemoryBudget } from '../limits/memory-budget.ts';
import { ClusterScrape, createPrimaryMetrics } from './metrics.ts';
import { shutdownDrainMs } from '../config/shutdown-drain.ts';
import { WorkerStartError } from './worker-start-error.ts';

/** A worker that dies sooner than this after it was forked is replaced only after this long (no crash loop at full speed). */
const QUICK_DEATH_MS = 1000;

function reloadedParts(ctx: AppContext): ReloadedParts {
  const { sources, start } = ctx.attestation;
  return {
    catalogue: ctx.catalogue,
    receiptContext: ctx.receiptContext,
    start,
    documents: { policy: ctx.documents.policy, startEvidence: ctx.documents.startEvidence },
    eventLog: sources.eventLog,
    manifestSha384: sources.manifestSha384 ?? null,
  };
}

async function handoffParts(built: SigilContext): Promise<Omit<Handoff, 'type' | 'workerId'>> {
  const ctx = built.state.ctx;
  const { signingKey } = ctx;
  return {
    ...reloadedParts(ctx),
    config: ctx.config,
    signingKey: {
      pkcs8: signingKey.privateKey.export({ format: 'der', type: 'pkcs8' }),
      origin: signingKey.origin,
      ...(signingKey.file === undefined ? {} : { file: signingKey.file }),
    },
    ...(ctx.ehbp === undefined ? {} : { ehbp: { privateKey: await exportEhbpPrivateKey(ctx.ehbp.key), keyConfig: Uint8Array.from(ctx.ehbp.keyConfig) } }),
    ...(built.tls === undefined ? {} : { tls: { mode: built.tls.mode, credentials: built.tls.current, keyOrigin: built.tls.keyOrigin } }),
    jwks: ctx.jwks,
    documents: ctx.documents,
    tlsSpkiSha256: ctx.attestation.tlsSpkiSha256,
    hpkeKeyConfig: ctx.attestation.hpkeKeyConfig,
    keyOrigin: ctx.attestation.sources.keyOrigin,
    ...(ctx.attestation.transparencyLog === undefined ? {} : { transparencyLog: ctx.attestation.transparencyLog }),
  };
}

/** Runs until SIGTERM or SIGINT has drained every worker; the exit code of `sigil serve`. */
export async function runPrimary(config: LoadedConfig, count: number, onReady: (url: string, ctx: AppContext) => void = () => {}): Promise<number> {
  const logger = createLogger(config.log.level, undefined, config.log.format);
  const built = await buildContext(config, { logger, handOffKeys: true });
  const { state, fleet } = built;
  const parts = await handoffParts(built);
  // Every worker's chat requests are admitted here, against the one set of counters (memory, or the fleet's Redis).
  const metrics = createPrimaryMetrics();
  const scrape = new ClusterScrape(metrics);
  const workers = new Map<number, Worker>();
  const shared: SharedState = {
    admission: new CountedAdmission(config.limits, built.counters),
    receipts: state.ctx.receiptStore,
    replays: state.ctx.ehbp?.replays,
    received: metrics.received,
    scrape: () => scrape.text(workers.values()),
    buffers: new MemoryBudget(config.limits.buffer_budget_bytes),
    ...(built.transparencyLog === undefined ? {} : { log: built.transparencyLog }),
  };
  cluster.setupPrimary({ serialization: 'advanced' });

  let replacements = 0;
  let draining = false;
  let nextId = 1;
  const broadcast = (message: ToWorker) => {
    for (const worker of workers.values()) if (worker.isConnected()) worker.send(message);
  };
  // Fleet mode: heartbeats, peer admission and revocations run here, on the primary's Redis connection; the workers get the results.
  fleet?.onJwks((jwks) => broadcast({ type: 'sigil:jwks', jwks }));
  fleet?.onRevoked((keyHash) => broadcast({ type: 'sigil:revoked', keyHash }));
  fleet?.onHealth((health) => broadcast({ type: 'sigil:fleet-health', health }));

  /** Forks one worker, hands it the keys, and resolves with its URL once it listens. */
  const fork = (): Promise<string> => {
    const workerId = nextId++;
    const forkedAt = Date.now();
    const worker = cluster.fork();
    workers.set(workerId, worker);
    metrics.workers.set(workers.size);
    const slots = answerWorker(worker, shared);
    // Made when the worker asks, so a replacement starts from the views in force now (reloads, the fleet's JWKS and revocations).
    const handoff = (): Handoff => ({
      ...parts,
      ...reloadedParts(state.ctx),
      jwks: state.ctx.jwks,
      documents: state.ctx.documents,
      ...(fleet === undefined ? {} : { fleet: { replicaId: fleet.status.replicaId, health: fleet.status.health(), revoked: [...fleet.revoked] } }),
      type: 'sigil:handoff',
      workerId,
    });
    const listening = new Promise<string>((resolve, reject) => {
      worker.on('message', (m: ToPrimary) => {
        if (m?.type === 'sigil:waiting') worker.send(handoff());
        else if (m?.type === 'sigil:listening') resolve(m.url);
        else if (m?.type === 'sigil:metrics') scrape.answered(m.id, m.metrics);
      });
      worker.once('exit', () => reject(new WorkerStartError(`worker ${workerId} exited before it listened`)));
    });
    worker.once('exit', (code, signal) => {
      workers.delete(workerId);
      metrics.workers.set(workers.size);
      slots.releaseAll();
      if (draining) {
        logger.info({ worker: workerId, pid: worker.process.pid, code, signal }, 'worker stopped');
        return;
      }
      replacements++;
      metrics.replacements.inc();
      logger.warn({ worker: workerId, pid: worker.process.pid, code, signal, replacements }, 'worker died; starting a replacement');
      const delay = Date.now() - forkedAt < QUICK_DEATH_MS ? QUICK_DEATH_MS : 0;
      setTimeout(() => {
        // A start that failed, or a SIGTERM, may have come in the meantime.
        if (!draining) fork().catch((err: Error) => logger.error({ err: err.message }, 'replacement worker did not start'));
      }, delay);
    });
    return listening;
  };

  let url: string;
  try {
    [url] = (await Promise.all(Array.from({ length: count }, fork))) as [string];
  } catch (err) {
    draining = true;
    for (const worker of workers.values()) worker.kill('SIGKILL');
    await built.close();
    throw err;
  }
  // Reloads are wired before Sigil says it listens: a SIGHUP sent on that line must reload, not end the process.
  const reload = async () => {
    const outcome = await reloadFiles(state);
    broadcast({ type: 'sigil:reload', ...reloadedParts(state.ctx) });
    return outcome;
  };
  const unwatch = watchFiles(state, reload);
  built.tls?.onRenewed((credentials) => broadcast({ type: 'sigil:tls', credentials }));
  const onHup = () => void reload();
  process.on('SIGHUP', onHup);
  const ctx = state.ctx;
  logger.info(
    {
      url,
      workers: count,
      tls: built.tls?.mode ?? 'off',
      tls_spki_sha256: ctx.attestation.tlsSpkiSha256,
      kid: ctx.signingKey.kid,
      key_origin: ctx.signingKey.origin,
      tee: ctx.attestation.start.tee,
      policy_hash: ctx.receiptContext.policyHash,
      models: ctx.catalogue.models.length,
      metrics: metricsAccess(ctx.config.metrics, process.env),
    },
    'sigil listening',
  );
  onReady(url, ctx);

  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  process.off('SIGHUP', onHup);
  unwatch();
  draining = true;
  const graceMs = config.limits.shutdown_grace_ms;
  const drainMs = shutdownDrainMs(config);
  const exited = [...workers.values()].map((worker) => new Promise<void>((resolve) => (worker.isDead() ? resolve() : worker.once('exit', () => resolve()))));
  broadcast({ type: 'sigil:drain', graceMs, drainMs });
  // A worker that does not finish its drain (plus a margin for its cut streams) is ended.
  const overdue = setTimeout(() => workers.forEach((worker) => worker.kill('SIGKILL')), graceMs + drainMs + 5000);
  await Promise.all(exited);
  clearTimeout(overdue);
  await built.close();
  logger.info({ url }, 'sigil stopped');
  return 0;
}
