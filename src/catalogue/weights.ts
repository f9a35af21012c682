/**
 * Measured model weights: a catalogue model that names its `weights` is hashed at start (every model side by side, at
 * disk speed, with a progress line) and must match its `model_hash`, so the hash a receipt repeats is measured, not
 * declared.
 */
import { stat } from 'node:fs/promises';
import { hashModel, modelFiles } from '@sigil/engine/hash';
import type { CatalogueModel } from './catalogue.ts';
import { CatalogueError } from './catalogue.ts';

export interface MeasuredModel {
  id: string;
  model_hash: string;
  /** True when the weights were hashed here and matched. */
  measured: boolean;
}

export interface WeightsProgress {
  /** Bytes hashed so far, of `total`, and the seconds since hashing began. */
  (done: number, total: number, seconds: number): void;
}

const PROGRESS_EVERY_MS = 2000;

/** Hashes every model's weights; throws CatalogueError naming the first model whose weights differ or cannot be read. */
export async function measureWeights(models: readonly CatalogueModel[], progress?: WeightsProgress, everyMs = PROGRESS_EVERY_MS): Promise<MeasuredModel[]> {
  const weighed = models.filter((m) => m.weights !== undefined);
  let total = 0;
  let done = 0;
  const started = Date.now();
  try {
    for (const m of weighed) for (const file of await modelFiles(m.weights!)) total += (await stat(file)).size;
  } catch (err) {
    throw new CatalogueError(
      `model weights cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message} (${(err as { path?: string }).path ?? ''})`,
    );
  }
  const ticker = weighed.length === 0 ? undefined : setInterval(() => progress?.(done, total, (Date.now() - started) / 1000), everyMs);
  try {
    const digests = await Promise.all(
      weighed.map(async (m) => {
        try {
          return await hashModel(m.weights!, (n) => (done += n));
        } catch (err) {
          throw new CatalogueError(
            `model ${m.id}: its weights ${m.weights} cannot be hashed (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
          );
        }
      }),
    );
    weighed.forEach((m, i) => {
      if (digests[i] !== m.model_hash) {
        throw new CatalogueError(
          `model ${m.id}: its weights ${m.weights} hash to ${digests[i]}, not the catalogue's model_hash ${m.model_hash}: refusing to serve weights other than the ones declared`,
        );
      }
    });
  } finally {
    if (ticker !== undefined) clearInterval(ticker);
  }
  if (weighed.length > 0) progress?.(done, total, (Date.now() - started) / 1000);
  return models.map((m) => ({ id: m.id, model_hash: m.model_hash, measured: m.weights !== undefined }));
}
