import type { WeightSource } from './llama-gguf.ts';
import type { LlamaShape } from './llama-shape.ts';
import { randomWeights } from './random-weights.ts';
import { SeededRandom } from './seeded-random.ts';

/** Logit of the scripted next token; every other token's logit stays near 0. */
const SCRIPTED_LOGIT = 20;

/**
 * Weights that make greedy decoding follow `chain`: after token chain[i] comes chain[i + 1].
 * Each block's attn_output and ffn_down are zero, so the residual stream that reaches the output is the
 * current token's embedding. Token chain[i] embeds as a code vector c_i of ±1 entries (RMS 1, so the
 * final RMSNorm keeps it), and output row chain[i + 1] is c_i * SCRIPTED_LOGIT / width: its logit is
 * SCRIPTED_LOGIT, every other token's is c_j·c_i/width * SCRIPTED_LOGIT, 0 for the orthogonal
 * (Hadamard) codes used up to `width` states, small for random codes beyond that.
 */
export function scriptedWeights(shape: LlamaShape, vocabSize: number, chain: readonly number[], seed: number): WeightSource {
  const width = shape.embeddingLength;
  const codes = codeVectors(chain.length - 1, width, seed);
  const base = randomWeights(seed);
  return (tensor) => {
    const weights = base(tensor);
    if (/attn_output|ffn_down/.test(tensor.name)) return weights.fill(0);
    if (tensor.name === 'token_embd.weight') {
      codes.forEach((code, i) => weights.set(code, chain[i]! * width));
    }
    if (tensor.name === 'output.weight') {
      weights.fill(0);
      codes.forEach((code, i) =>
        weights.set(
          code.map((x) => (x * SCRIPTED_LOGIT) / width),
          chain[i + 1]! * width,
        ),
      );
    }
    return weights;
  };
}

function codeVectors(count: number, width: number, seed: number): Float32Array[] {
  if (count <= width && (width & (width - 1)) === 0) {
    return Array.from({ length: count }, (_, i) => hadamardRow(i, width));
  }
  const random = new SeededRandom(seed ^ 0x5eed);
  const codes = Array.from({ length: count }, () => Float32Array.from({ length: width }, () => (random.next() < 0.5 ? -1 : 1)));
  const worst = Math.max(...codes.flatMap((a, i) => codes.slice(i + 1).map((b) => Math.abs(dot(a, b)))));
  if (worst > width * 0.6) throw new Error(`a scripted answer of ${count} tokens is too long for a ${width}-wide model`);
  return codes;
}

/** Row i of the Sylvester Hadamard matrix: entry j is (-1)^popcount(i & j). */
function hadamardRow(i: number, width: number): Float32Array {
  return Float32Array.from({ length: width }, (_, j) => (popcount(i & j) % 2 === 0 ? 1 : -1));
}

function popcount(n: number): number {
  let count = 0;
  for (let x = n; x; x &= x - 1) count++;
  return count;
}

function dot(a: Float32Array, b: Float32Array): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += a[i]! * b[i]!;
  return sum;
}
