import type { CatalogueModel } from '../catalogue/catalogue.ts';
import type { Endpoint } from '../catalogue/schema.ts';
import { chatUsage, type StreamCompletion, type TokenUsage } from '../proxy/sse-relay.ts';
import { checkChatFields, checkMessagesFields } from './chat-request.ts';
import { completingEventOf, streamEndingOf } from '../protocol/stream-ending.ts';

/**
 * What differs between the endpoints Sigil relays, OpenAI's (docs/api.md#completions-embeddings-responses) and Anthropic's Messages
 * API (docs/api.md#anthropic-messages); everything else (auth, limits, model mapping, byte-exact relay, receipts) is one pipeline for all of them.
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
  /** With the `event` ending, the `type` of the event that ends the stream. */
  completingEvent?: string;
  /** The shape errors take on this path: OpenAI's, or the Messages API's (src/protocol/anthropic-error.ts). */
  errors: 'openai' | 'anthropic';
  /** Client headers the engine always gets on this path (the API's version and beta flags), besides `forward_headers`. */
  engineHeaders: readonly string[];
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

/**
 * The Messages API counts `input_tokens` and `output_tokens`: in a response, in a stream's `message_start` (under `message`) and
 * its `message_delta`, which may carry the output count alone (the relay keeps the input count it read before).
 */
function messagesUsage(event: Record<string, unknown>): TokenUsage | undefined {
  const value = event.usage;
  if (value === null || typeof value !== 'object') return undefined;
  const { input_tokens, output_tokens } = value as Record<string, unknown>;
  if (typeof output_tokens !== 'number') return undefined;
  return { prompt_tokens: typeof input_tokens === 'number' ? input_tokens : 0, completion_tokens: output_tokens };
}

const noFieldChecks = () => undefined;
const noUsage = () => undefined;
const OPENAI = { errors: 'openai', engineHeaders: [] } as const;
/** What Anthropic's SDKs send and an engine serving the Messages API reads (vLLM, llama.cpp's server, LiteLLM). */
const ANTHROPIC = { errors: 'anthropic', engineHeaders: ['anthropic-version', 'anthropic-beta'] } as const;

export const CHAT: EndpointDescription = {
  kind: 'chat',
  path: '/v1/chat/completions',
  enginePath: '/chat/completions',
  checkFields: checkChatFields,
  completion: streamEndingOf('/v1/chat/completions'),
  ...OPENAI,
  readUsage: chatUsage,
};
export const COMPLETIONS: EndpointDescription = {
  kind: 'completions',
  path: '/v1/completions',
  enginePath: '/completions',
  checkFields: noFieldChecks,
  completion: streamEndingOf('/v1/completions'),
  ...OPENAI,
  readUsage: chatUsage,
};
export const EMBEDDINGS: EndpointDescription = {
  kind: 'embeddings',
  path: '/v1/embeddings',
  enginePath: '/embeddings',
  checkFields: noFieldChecks,
  completion: streamEndingOf('/v1/embeddings'),
  ...OPENAI,
  readUsage: embeddingsUsage,
};
export const RESPONSES: EndpointDescription = {
  kind: 'responses',
  path: '/v1/responses',
  enginePath: '/responses',
  checkFields: noFieldChecks,
  completion: streamEndingOf('/v1/responses'),
  completingEvent: completingEventOf('/v1/responses')!,
  ...OPENAI,
  readUsage: responsesUsage,
};
export const MESSAGES: EndpointDescription = {
  kind: 'messages',
  path: '/v1/messages',
  enginePath: '/messages',
  checkFields: checkMessagesFields,
  completion: streamEndingOf('/v1/messages'),
  completingEvent: completingEventOf('/v1/messages')!,
  ...ANTHROPIC,
  readUsage: messagesUsage,
};
export const MESSAGES_COUNT_TOKENS: EndpointDescription = {
  kind: 'messages_count_tokens',
  path: '/v1/messages/count_tokens',
  enginePath: '/messages/count_tokens',
  checkFields: noFieldChecks,
  completion: streamEndingOf('/v1/messages/count_tokens'),
  ...ANTHROPIC,
  readUsage: noUsage,
};

export const RELAYED_ENDPOINTS: readonly EndpointDescription[] = [CHAT, COMPLETIONS, EMBEDDINGS, RESPONSES, MESSAGES, MESSAGES_COUNT_TOKENS];
