/** The hyperparameters of a generated llama-architecture model. */
export interface LlamaShape {
  contextLength: number;
  embeddingLength: number;
  blockCount: number;
  feedForwardLength: number;
  headCount: number;
  headCountKv: number;
  rmsEpsilon: number;
  ropeFreqBase: number;
}

/** 64 wide, 2 layers: a few MB, hundreds of tokens/s on one CPU thread. */
export const TINY_LLAMA: LlamaShape = {
  contextLength: 4096,
  embeddingLength: 64,
  blockCount: 2,
  feedForwardLength: 256,
  headCount: 4,
  headCountKv: 4,
  rmsEpsilon: 1e-5,
  ropeFreqBase: 10000,
};

export interface TensorShape {
  name: string;
  /** ggml order: dims[0] is the input width of a weight matrix. */
  dims: [number] | [number, number];
}

/** Every tensor llama.cpp's llama architecture loads, in the order convert_hf_to_gguf.py writes them. */
export function llamaTensorShapes(shape: LlamaShape, vocabSize: number): TensorShape[] {
  const n = shape.embeddingLength;
  const kv = (n / shape.headCount) * shape.headCountKv;
  const ff = shape.feedForwardLength;
  const tensors: TensorShape[] = [{ name: 'token_embd.weight', dims: [n, vocabSize] }];
  for (let b = 0; b < shape.blockCount; b++) {
    tensors.push(
      { name: `blk.${b}.attn_norm.weight`, dims: [n] },
      { name: `blk.${b}.attn_q.weight`, dims: [n, n] },
      { name: `blk.${b}.attn_k.weight`, dims: [n, kv] },
      { name: `blk.${b}.attn_v.weight`, dims: [n, kv] },
      { name: `blk.${b}.attn_output.weight`, dims: [n, n] },
      { name: `blk.${b}.ffn_norm.weight`, dims: [n] },
      { name: `blk.${b}.ffn_gate.weight`, dims: [n, ff] },
      { name: `blk.${b}.ffn_up.weight`, dims: [n, ff] },
      { name: `blk.${b}.ffn_down.weight`, dims: [ff, n] },
    );
  }
  tensors.push({ name: 'output_norm.weight', dims: [n] }, { name: 'output.weight', dims: [n, vocabSize] });
  return tensors;
}
