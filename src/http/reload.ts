import { statSync } from 'node:fs';
import { readKeysFile } from '../auth/keys-file.ts';
import { loadCatalogue } from '../catalogue/catalogue.ts';
import { attestationHash, makeAttestationDocument } from '../attestation/document.ts';
import { measureReload } from '../attestation/measured-state.ts';
import { measureWeights } from '../catalogue/weights.ts';
import { START_NONCE } from '../protocol/attestation.ts';
import type { AppState } from './server.ts';
import { buildServedCatalogue } from './served-catalogue.ts';

export interface ReloadOutcome {
  keys: boolean;
  catalogue: boolean;
}

const WATCH_INTERVAL_MS = 1000;

/**
 * Re-reads the keys file and the catalogue and swaps them in whole. Requests in flight keep the
 * context they started with, so nothing is dropped; a file that fails to load leaves the old one in use.
 */
const pending = new WeakMap<AppState, Promise<ReloadOutcome>>();

/** Reloads run one after another, so a slow engine listing cannot swap an older catalogue in over a newer one. */
export function reloadFiles(state: AppState): Promise<ReloadOutcome> {
  const next = (pending.get(state) ?? Promise.resolve()).then(() => reloadNow(state));
  pending.set(
    state,
    next.catch(() => ({ keys: false, catalogue: false })),
  );
  return next;
}

async function reloadNow(state: AppState): Promise<ReloadOutcome> {
  const ctx = state.ctx;
  const outcome: ReloadOutcome = { keys: false, catalogue: false };
  try {
    const keys = readKeysFile(ctx.config.auth.keys_file);
    ctx.keyRing.replace(keys);
    outcome.keys = true;
    ctx.logger.info({ keys: keys.length }, 'API keys reloaded');
  } catch (err) {
    ctx.logger.error({ err: (err as Error).message }, 'keys file not reloaded; the previous keys stay in use');
  }
  if (ctx.config.catalogue === undefined) return outcome;
  try {
    const loaded = loadCatalogue(ctx.config.catalogue, [...ctx.upstreams.keys()]);
    const models = await measureWeights(loaded.models);
    const { catalogue, policy, policyHash } = await buildServedCatalogue(loaded, ctx.config, ctx.upstreams, ctx.logger);
    // On a TEE the new state is measured (on TDX, extended into RTMR3) and the start evidence remade before it serves.
    const now = state.ctx;
    let receiptContext = { ...now.receiptContext, policyHash };
    let manifest: string | undefined;
    if (now.measured !== undefined) manifest = await measureReload(now.measured, now.attestation.sources, now.config, loaded.sha256, models, policyHash);
    // Without hardware too, so that the start document (sent with signed nonces) binds the policy in force.
    const { sources, tlsSpkiSha256, hpkeKeyConfig, transparencyLog } = now.attestation;
    const bound = { tlsSpkiSha256, hpkeKeyConfig, ...(transparencyLog === undefined ? {} : { transparencyLog }) };
    const { document } = await makeAttestationDocument(sources, { jwks: now.jwks, policyHash, ...bound }, START_NONCE);
    const attestation = { ...now.attestation, start: document };
    const evidenceHash = attestationHash(document);
    if (evidenceHash !== undefined) receiptContext = { ...receiptContext, attestationHash: evidenceHash };
    state.ctx = {
      ...state.ctx,
      catalogue,
      receiptContext,
      attestation,
      documents: { ...state.ctx.documents, policy: JSON.stringify(policy), startEvidence: JSON.stringify(attestation.start) },
    };
    outcome.catalogue = true;
    ctx.logger.info(
      { models: catalogue.models.length, policy_hash: policyHash, ...(manifest === undefined ? {} : { manifest_sha384: manifest }) },
      'catalogue reloaded',
    );
  } catch (err) {
    ctx.logger.error(
      { err: (err as Error).message },
      'catalogue not reloaded (a reload that cannot be measured is refused); the previous catalogue stays in use',
    );
  }
  return outcome;
}

/**
 * Reloads (by `reload`, default reloadFiles) when the keys file or the catalogue changes on disk (polling: survives
 * atomic renames). What is on disk is noted at once, when watching starts: fs.watchFile takes its first look later, on
 * the thread pool, so on a loaded machine it missed a change made just after the start.
 */
export function watchFiles(state: AppState, reload: () => Promise<unknown> = () => reloadFiles(state)): () => void {
  const paths = [state.ctx.config.auth.keys_file, state.ctx.config.catalogue].filter((p): p is string => p !== undefined);
  const seen = new Map(paths.map((path) => [path, fingerprint(path)]));
  const timer = setInterval(() => {
    let changed = false;
    for (const path of paths) {
      const now = fingerprint(path);
      if (now !== seen.get(path)) changed = true;
      seen.set(path, now);
    }
    if (changed) void reload();
  }, WATCH_INTERVAL_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/** A file's identity, size and modification time (nanoseconds), or "missing". */
function fingerprint(path: string): string {
  try {
    const stat = statSync(path, { bigint: true });
    return `${stat.ino}:${stat.size}:${stat.mtimeNs}`;
  } catch {
    return 'missing';
  }
}
