import type { WeightSource } from './llama-gguf.ts';
import { SeededRandom } from './seeded-random.ts';

/** Gaussian weights scaled by 1/sqrt(fan-in), unit embeddings and unit norms: an untrained model, deterministic per seed. */
export function randomWeights(seed: number): WeightSource {
  const random = new SeededRandom(seed);
  return ({ name, dims }) => {
    const count = dims.reduce((a, b) => a * b, 1);
    if (dims.length === 1) return new Float32Array(count).fill(1);
    const std = name === 'token_embd.weight' ? 1 : 1 / Math.sqrt(dims[0]);
    return random.normals(count, std);
  };
}
