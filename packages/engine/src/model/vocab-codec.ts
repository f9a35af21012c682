import { LlamaLogLevel, type Token } from 'node-llama-cpp';
import { loadLlama } from '../llama-runtime.ts';
import type { TextCodec } from './script-tokens.ts';

/** llama.cpp's own tokenizer for a vocabulary file, loaded without weights. */
export async function openVocabCodec(vocabPath: string): Promise<TextCodec & { close(): Promise<void> }> {
  const llama = await loadLlama();
  const level = llama.logLevel;
  // llama.cpp logs a spurious "missing tensor" error while probing a weightless file, then loads its vocabulary.
  llama.logLevel = LlamaLogLevel.disabled;
  const model = await llama.loadModel({ modelPath: vocabPath, vocabOnly: true }).finally(() => {
    llama.logLevel = level;
  });
  return {
    tokenize: (text) => model.tokenize(text, false, 'trimLeadingSpace') as number[],
    detokenize: (tokens, previous) => model.detokenize(tokens as Token[], false, previous as Token[]),
    close: () => model.dispose(),
  };
}
