import { access, mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { sha256File } from './hash/hash-file.ts';
import { DEFAULT_MODEL_SEED, makeModel } from './model/make-model.ts';

/**
 * The zero-config demo model: a tiny llama GGUF with random weights (fixed seed) and the shipped
 * Phi-3 vocabulary. Made at `path` when missing, reused otherwise; its hash is always computed from the file.
 */
export async function ensureDemoModel(path: string): Promise<{ path: string; sha256: string }> {
  const exists = await access(path).then(
    () => true,
    () => false,
  );
  if (!exists) {
    await mkdir(dirname(path), { recursive: true });
    await makeModel({ out: path, seed: DEFAULT_MODEL_SEED });
  }
  return { path, sha256: `sha256:${await sha256File(path)}` };
}
