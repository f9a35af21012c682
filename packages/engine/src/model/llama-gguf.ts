import { writeGguf } from '../gguf/write.ts';
import type { GgmlTypeName, GgufMetadata, GgufTensor } from '../gguf/types.ts';
import type { Vocab } from '../vocab/read-vocab.ts';
import { END_OF_TURN_TOKEN, GENERATED_CHAT_TEMPLATE, TEMPLATE_CONTROL_TOKENS } from './chat-template.ts';
import { llamaTensorShapes, type LlamaShape, type TensorShape } from './llama-shape.ts';

export type WeightSource = (tensor: TensorShape) => Float32Array;

export interface LlamaGgufOptions {
  name: string;
  shape: LlamaShape;
  vocab: Vocab;
  weights: WeightSource;
}

/** A complete llama-architecture GGUF: hyperparameters, the vocabulary's tokenizer, the chat template and weights. */
export function buildLlamaGguf({ name, shape, vocab, weights }: LlamaGgufOptions): Buffer {
  for (const token of TEMPLATE_CONTROL_TOKENS) {
    if (vocab.idOf(token) === undefined) throw new Error(`the vocabulary has no ${token} token, which the chat template needs`);
  }
  const u32 = (value: number) => ({ type: 'u32', value }) as const;
  const metadata: GgufMetadata = new Map([
    ['general.architecture', { type: 'string', value: 'llama' }],
    ['general.name', { type: 'string', value: name }],
    ['llama.context_length', u32(shape.contextLength)],
    ['llama.embedding_length', u32(shape.embeddingLength)],
    ['llama.block_count', u32(shape.blockCount)],
    ['llama.feed_forward_length', u32(shape.feedForwardLength)],
    ['llama.attention.head_count', u32(shape.headCount)],
    ['llama.attention.head_count_kv', u32(shape.headCountKv)],
    ['llama.attention.layer_norm_rms_epsilon', { type: 'f32', value: shape.rmsEpsilon }],
    ['llama.rope.dimension_count', u32(shape.embeddingLength / shape.headCount)],
    ['llama.rope.freq_base', { type: 'f32', value: shape.ropeFreqBase }],
    ['llama.vocab_size', u32(vocab.tokens.length)],
    ...vocab.keys,
    ['tokenizer.ggml.eot_token_id', u32(vocab.idOf(END_OF_TURN_TOKEN)!)],
    ['tokenizer.chat_template', { type: 'string', value: GENERATED_CHAT_TEMPLATE }],
  ]);
  const tensors: GgufTensor[] = llamaTensorShapes(shape, vocab.tokens.length).map((tensor) => ({
    name: tensor.name,
    dims: tensor.dims,
    type: storageType(tensor),
    data: weights(tensor),
  }));
  return writeGguf(metadata, tensors);
}

/** The two vocabulary-sized matrices are 8-bit (a quarter of F32); norms must stay F32. */
function storageType(tensor: TensorShape): GgmlTypeName {
  return tensor.name === 'token_embd.weight' || tensor.name === 'output.weight' ? 'Q8_0' : 'F32';
}
