import type { CatalogueModel } from '../catalogue/catalogue.ts';
import type { Endpoint } from '../catalogue/schema.ts';
import { chatUsage, type StreamCompletion, type TokenUsage } from '../proxy/sse-relay.ts';
import { checkChatFields } from './chat-request.ts';
import { streamEndingOf } from '../protocol/stream-ending.ts';

/**
 * What differs between the OpenAI endpoints Sigil relays (docs/api.md#completions-embeddings-responses); everything else (auth,
 * limits, model mapping, byte-exact relay, receipts) is one pipeline for all of them.
 */
export interface EndpointDescription {
  /** The catalogue's name for the endpoint (a model lists the ones it serves). */
  kind: Endpoint;
  /** The client-facing path, also the route's name in logs and metrics. */
  path: string;
  /** The path under the engine's OpenAI base URL. */
  enginePath: string;
  /** Checks the fields the contract fixes for this endpoint beyond `model`; the rest is the engine's. */
  checkFields(body: Record<string, unknown>, model: CatalogueModel): void;
  /** How a stream from the engine says it is finished. */
  completion: StreamCompletion;
  /** The token counts in a response or stream event, for the token limits and the log. */
  readUsage(event: Record<string, unknown>): TokenUsage | undefined;
}

/** The responses API counts `input_tokens` and `output_tokens`, at the top of a response or under `response` in stream events. */
function responsesUsage(event: Record<string, unknown>): TokenUsage | undefined {
  const value = event.usage;
  if (value === null || typeof value !== 'object') return undefined;
  const { input_tokens, output_tokens } = value as Record<string, unknown>;
  if (typeof input_tokens !== 'number' || typeof output_tokens !== 'number') return undefined;
  return { prompt_tokens: input_tokens, completion_tokens: output_tokens };
}

/** Embeddings generate nothing: their usage is the input's tokens. */
function embeddingsUsage(event: Record<string, unknown>): TokenUsage | undefined {
  const value = event.usage;
  if (value === null || typeof value !== 'object') return undefined;
  const { prompt_tokens } = value as Record<string, unknown>;
  return typeof prompt_tokens === 'number' ? { prompt_tokens, completion_tokens: 0 } : undefined;
}

const noFieldChecks = () => undefined;

export const CHAT: EndpointDescription = {
  kind: 'chat',
  path: '/v1/chat/completions',
  enginePath: '/chat/completions',
  checkFields: checkChatFields,
  completion: streamEndingOf('/v1/chat/completions'),
  readUsage: chatUsage,
};
export const COMPLETIONS: EndpointDescription = {
  kind: 'completions',
  path: '/v1/completions',
  enginePath: '/completions',
  checkFields: noFieldChecks,
  completion: streamEndingOf('/v1/completions'),
  readUsage: chatUsage,
};
export const EMBEDDINGS: EndpointDescription = {
  kind: 'embeddings',
  path: '/v1/embeddings',
  enginePath: '/embeddings',
  checkFields: noFieldChecks,
  completion: streamEndingOf('/v1/embeddings'),
  readUsage: embeddingsUsage,
};
export const RESPONSES: EndpointDescription = {
  kind: 'responses',
  path: '/v1/responses',
  enginePath: '/responses',
  checkFields: noFieldChecks,
  completion: streamEndingOf('/v1/responses'),
  readUsage: responsesUsage,
};

export const RELAYED_ENDPOINTS: readonly EndpointDescription[] = [CHAT, COMPLETIONS, EMBEDDINGS, RESPONSES];
