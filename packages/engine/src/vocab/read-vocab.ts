import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { readGgufHeader } from '../gguf/read.ts';
import type { GgufValue } from '../gguf/types.ts';

/** The vocabulary shipped with Sigil: llama.cpp's `models/ggml-vocab-phi-3.gguf` (MIT), 32,064 SentencePiece tokens. */
export const DEFAULT_VOCAB_PATH = fileURLToPath(new URL('./phi-3.gguf', import.meta.url));

export interface Vocab {
  /** Every `tokenizer.ggml.*` key of the source file, typed as stored, to copy into a model. */
  keys: Map<string, GgufValue>;
  tokens: readonly string[];
  bosId: number;
  eosId: number;
  /** The id of a token's text, if the vocabulary has it. */
  idOf(text: string): number | undefined;
}

/** Reads the tokenizer of a llama.cpp vocab-only GGUF file (or of any GGUF model). */
export async function readVocab(path: string = DEFAULT_VOCAB_PATH): Promise<Vocab> {
  const { metadata } = readGgufHeader(await readFile(path));
  const keys = new Map([...metadata].filter(([key]) => key.startsWith('tokenizer.ggml.')));
  const tokensValue = keys.get('tokenizer.ggml.tokens');
  if (tokensValue?.type !== 'array' || tokensValue.itemType !== 'string') {
    throw new Error(`${path}: no tokenizer.ggml.tokens array; not a vocabulary file`);
  }
  const tokens = tokensValue.values as readonly string[];
  const ids = new Map(tokens.map((text, id) => [text, id]));
  return {
    keys,
    tokens,
    bosId: numberKey(keys, 'tokenizer.ggml.bos_token_id', path),
    eosId: numberKey(keys, 'tokenizer.ggml.eos_token_id', path),
    idOf: (text) => ids.get(text),
  };
}

function numberKey(keys: Map<string, GgufValue>, key: string, path: string): number {
  const value = keys.get(key);
  if (value === undefined || typeof value.type !== 'string' || !('value' in value) || typeof value.value !== 'number') {
    throw new Error(`${path}: missing ${key}`);
  }
  return value.value;
}
