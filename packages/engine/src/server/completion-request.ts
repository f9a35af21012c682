import { invalidRequest } from './errors.ts';
import type { SamplingRequest } from './generate.ts';
import { isObject, optionalBoolean, optionalInteger, optionalNumber, parseMaxTokens, parseStop, parseStreamOptions } from './request-fields.ts';
import { parseResponseFormat, type AnswerShape } from './structured-output.ts';

/** The parts of a (legacy) completions request the engine acts on, validated. */
export interface CompletionRequest extends SamplingRequest {
  prompt: string;
  stream: boolean;
  includeUsage: boolean;
  /** OpenAI's and vLLM's default for /v1/completions is 16 tokens. */
  maxTokens: number;
  /** Free text, or JSON (of a schema) under a grammar, from `response_format`. */
  format: Extract<AnswerShape, { kind: 'text' | 'json' }>;
}

const DEFAULT_MAX_TOKENS = 16;

/** Validates a parsed JSON body as OpenAI's completions request; throws a 400 naming the bad field. */
export function parseCompletionRequest(body: unknown): CompletionRequest {
  if (!isObject(body)) throw invalidRequest('The request body must be a JSON object.');
  if (body.model !== undefined && typeof body.model !== 'string') throw invalidRequest('model must be a string.', 'model');
  if (body.n !== undefined && body.n !== 1) throw invalidRequest('Only n = 1 is supported.', 'n');
  if (body.echo !== undefined && body.echo !== false) throw invalidRequest('echo is not supported by this engine.', 'echo');
  if (body.suffix !== undefined && body.suffix !== null) throw invalidRequest('suffix is not supported by this engine.', 'suffix');
  return {
    prompt: parsePrompt(body.prompt),
    stream: optionalBoolean(body.stream, 'stream') ?? false,
    includeUsage: parseStreamOptions(body.stream_options),
    maxTokens: parseMaxTokens(body) ?? DEFAULT_MAX_TOKENS,
    temperature: optionalNumber(body.temperature, 'temperature', 0, 2) ?? 1,
    topP: optionalNumber(body.top_p, 'top_p', 0, 1) ?? 1,
    seed: optionalInteger(body.seed, 'seed'),
    stop: parseStop(body.stop),
    format: parseResponseFormat(body.response_format),
  };
}

/** A string, or a list holding exactly one string (batches of prompts are not served). */
function parsePrompt(value: unknown): string {
  if (typeof value === 'string') return value;
  if (Array.isArray(value) && value.length === 1 && typeof value[0] === 'string') return value[0];
  throw invalidRequest('prompt must be a string (or a list of one string).', 'prompt');
}
