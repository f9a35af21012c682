// npm run build with --omit=optional: node-llama-cpp is absent, so the engine's sources see its names as 'any'.
// The built engine is never loaded then: `sigil engine` stops first with "the built-in engine is not installed".
/* eslint-disable @typescript-eslint/no-explicit-any */
declare module 'node-llama-cpp' {
  export type ChatHistoryItem = any;
  export const ChatHistoryItem: any;
  export type ChatModelFunctions = any;
  export const ChatModelFunctions: any;
  export interface ChatWrapper {
    [member: string]: any;
    generateContextState(options: unknown): { stopGenerationTriggers: Array<{ values: any[]; [member: string]: any }> };
  }
  export const ChatWrapper: any;
  export type GbnfJsonSchema = any;
  export const GbnfJsonSchema: any;
  export type Llama = any;
  export const Llama: any;
  export type LlamaContext = any;
  export const LlamaContext: any;
  export type LlamaContextSequence = any;
  export const LlamaContextSequence: any;
  export type LlamaEmbeddingContext = any;
  export const LlamaEmbeddingContext: any;
  export type LlamaGrammar = any;
  export const LlamaGrammar: any;
  export type LlamaGrammarEvaluationState = any;
  export const LlamaGrammarEvaluationState: any;
  export type LlamaLogLevel = any;
  export const LlamaLogLevel: any;
  export type LlamaText = any;
  export const LlamaText: any;
  export type LlamaModel = any;
  export const LlamaModel: any;
  export type SpecialTokensText = any;
  export const SpecialTokensText: any;
  export type Token = any;
  export const Token: any;
  export function getLlama(options?: unknown): Promise<Llama>;
  export const resolveChatWrapper: any;
}
