import { createHash } from 'node:crypto';
import { rename, writeFile } from 'node:fs/promises';
import { DEFAULT_VOCAB_PATH, readVocab } from '../vocab/read-vocab.ts';
import { ANSWER_MARKER_TOKEN, END_OF_TURN_TOKEN } from './chat-template.ts';
import { buildLlamaGguf } from './llama-gguf.ts';
import { TINY_LLAMA } from './llama-shape.ts';
import { randomWeights } from './random-weights.ts';
import { scriptTokens } from './script-tokens.ts';
import { scriptedWeights } from './scripted-weights.ts';
import { openVocabCodec } from './vocab-codec.ts';

export interface MakeModelOptions {
  out: string;
  vocabPath?: string;
  /** Greedy decoding answers exactly this text, then the end-of-turn token. Random weights when absent. */
  scripted?: string;
  seed?: number;
}

export interface MadeModel {
  path: string;
  sha256: string;
  bytes: number;
  /** The token ids a scripted model answers with, before its end-of-turn token. */
  scriptedTokens?: number[];
}

export const DEFAULT_MODEL_SEED = 42;

/** Writes a tiny llama GGUF with a real vocabulary; the file appears whole or not at all. */
export async function makeModel(options: MakeModelOptions): Promise<MadeModel> {
  const vocabPath = options.vocabPath ?? DEFAULT_VOCAB_PATH;
  const seed = options.seed ?? DEFAULT_MODEL_SEED;
  const vocab = await readVocab(vocabPath);
  let scriptedTokens: number[] | undefined;
  let weights = randomWeights(seed);
  if (options.scripted !== undefined) {
    const marker = vocab.idOf(ANSWER_MARKER_TOKEN);
    const end = vocab.idOf(END_OF_TURN_TOKEN);
    if (marker === undefined || end === undefined) throw new Error(`the vocabulary lacks ${ANSWER_MARKER_TOKEN} or ${END_OF_TURN_TOKEN}`);
    const codec = await openVocabCodec(vocabPath);
    try {
      scriptedTokens = scriptTokens(options.scripted, codec, vocab, marker);
    } finally {
      await codec.close();
    }
    weights = scriptedWeights(TINY_LLAMA, vocab.tokens.length, [marker, ...scriptedTokens, end], seed);
  }
  const name = options.scripted === undefined ? `sigil-random-${seed}` : 'sigil-scripted';
  const file = buildLlamaGguf({ name, shape: TINY_LLAMA, vocab, weights });
  const partial = `${options.out}.${process.pid}.partial`;
  await writeFile(partial, file);
  await rename(partial, options.out);
  const sha256 = `sha256:${createHash('sha256').update(file).digest('hex')}`;
  return { path: options.out, sha256, bytes: file.length, ...(scriptedTokens ? { scriptedTokens } : {}) };
}
