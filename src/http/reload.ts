import { unwatchFile, watchFile } from 'node:fs';
import { readKeysFile } from '../auth/keys-file.ts';
import { loadCatalogue } from '../catalogue/catalogue.ts';
import { buildPolicy } from '../policy/document.ts';
import { jcsSha256 } from '../protocol/jcs.ts';
import type { AppState } from './server.ts';

const WATCH_INTERVAL_MS = 1000;

/**
 * Re-reads the keys file and the catalogue and swaps them in whole. Requests in flight keep the
 * context they started with, so nothing is dropped; a file that fails to load leaves the old one in use.
 */
export function reloadFiles(state: AppState): { keys: boolean; catalogue: boolean } {
  const ctx = state.ctx;
  const outcome = { keys: false, catalogue: false };
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
    const catalogue = loadCatalogue(ctx.config.catalogue, [...ctx.upstreams.keys()]);
    const policy = buildPolicy(catalogue, ctx.config);
    const policyHash = jcsSha256(policy);
    state.ctx = {
      ...state.ctx,
      catalogue,
      receiptContext: { ...state.ctx.receiptContext, policyHash },
      documents: { ...state.ctx.documents, policy: JSON.stringify(policy) },
    };
    outcome.catalogue = true;
    ctx.logger.info({ models: catalogue.models.length, policy_hash: policyHash }, 'catalogue reloaded');
  } catch (err) {
    ctx.logger.error({ err: (err as Error).message }, 'catalogue not reloaded; the previous catalogue stays in use');
  }
  return outcome;
}

/** Reloads when the keys file or the catalogue changes on disk (polling: survives atomic renames). */
export function watchFiles(state: AppState): () => void {
  const paths = [state.ctx.config.auth.keys_file, state.ctx.config.catalogue].filter((p): p is string => p !== undefined);
  const onChange = () => reloadFiles(state);
  for (const path of paths) watchFile(path, { interval: WATCH_INTERVAL_MS, persistent: false }, onChange);
  return () => paths.forEach((path) => unwatchFile(path, onChange));
}
