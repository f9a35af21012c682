import type { AssistantMessage, ChatFinishReason, Delta } from './chat-answer.ts';
import type { GenerationResult } from './generate.ts';

/** The response and stream-chunk bodies, field for field as vLLM's OpenAI server writes them. */
export interface CompletionIdentity {
  id: string;
  created: number;
  model: string;
}

export function usageOf(result: GenerationResult): { prompt_tokens: number; total_tokens: number; completion_tokens: number } {
  return {
    prompt_tokens: result.promptTokens,
    total_tokens: result.promptTokens + result.completionTokens,
    completion_tokens: result.completionTokens,
  };
}

export function completionBody(identity: CompletionIdentity, message: AssistantMessage, finishReason: ChatFinishReason, result: GenerationResult): object {
  return {
    id: identity.id,
    object: 'chat.completion',
    created: identity.created,
    model: identity.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason }],
    usage: usageOf(result),
  };
}

export function chunkBody(identity: CompletionIdentity, delta: Delta, finishReason: ChatFinishReason | null = null): object {
  return {
    id: identity.id,
    object: 'chat.completion.chunk',
    created: identity.created,
    model: identity.model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
  };
}

export function usageChunkBody(identity: CompletionIdentity, result: GenerationResult): object {
  return {
    id: identity.id,
    object: 'chat.completion.chunk',
    created: identity.created,
    model: identity.model,
    choices: [],
    usage: usageOf(result),
  };
}

export function sseEvent(body: object | '[DONE]'): string {
  return `data: ${typeof body === 'string' ? body : JSON.stringify(body)}\n\n`;
}
