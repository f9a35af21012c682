import { invalidRequest } from './errors.ts';
import { isObject, optionalBoolean, optionalInteger, optionalNumber, parseMaxTokens, parseStop, parseStreamOptions } from './request-fields.ts';

export type ChatRole = 'system' | 'user' | 'assistant';

export interface ChatMessage {
  role: ChatRole;
  content: string;
}

/** The parts of a chat-completions request the engine acts on, validated. */
export interface ChatRequest {
  messages: ChatMessage[];
  stream: boolean;
  includeUsage: boolean;
  maxTokens: number | undefined;
  temperature: number;
  topP: number;
  seed: number | undefined;
  stop: string[];
}

const ROLES = new Set<string>(['system', 'user', 'assistant']);

/** Validates a parsed JSON body as OpenAI's chat-completions request; throws a 400 naming the bad field. */
export function parseChatRequest(body: unknown): ChatRequest {
  if (!isObject(body)) throw invalidRequest('The request body must be a JSON object.');
  if (body.model !== undefined && typeof body.model !== 'string') throw invalidRequest('model must be a string.', 'model');
  if (body.n !== undefined && body.n !== 1) throw invalidRequest('Only n = 1 is supported.', 'n');
  return {
    messages: parseMessages(body.messages),
    stream: optionalBoolean(body.stream, 'stream') ?? false,
    includeUsage: parseStreamOptions(body.stream_options),
    maxTokens: parseMaxTokens(body),
    temperature: optionalNumber(body.temperature, 'temperature', 0, 2) ?? 1,
    topP: optionalNumber(body.top_p, 'top_p', 0, 1) ?? 1,
    seed: optionalInteger(body.seed, 'seed'),
    stop: parseStop(body.stop),
  };
}

function parseMessages(value: unknown): ChatMessage[] {
  if (!Array.isArray(value) || value.length === 0) throw invalidRequest('messages must be a non-empty array.', 'messages');
  return value.map((message, i) => {
    const param = `messages[${i}]`;
    if (!isObject(message)) throw invalidRequest(`${param} must be an object.`, param);
    if (typeof message.role !== 'string' || !ROLES.has(message.role)) {
      throw invalidRequest(`${param}.role must be one of system, user, assistant.`, `${param}.role`);
    }
    return { role: message.role as ChatRole, content: parseContent(message.content, message.role, `${param}.content`) };
  });
}

/** A string, or an array of `{type: "text", text}` parts joined; an assistant message may have null content. */
function parseContent(value: unknown, role: string, param: string): string {
  if (typeof value === 'string') return value;
  if (value === null && role === 'assistant') return '';
  if (Array.isArray(value)) {
    return value
      .map((part) => {
        if (isObject(part) && part.type === 'text' && typeof part.text === 'string') return part.text;
        throw invalidRequest(`${param} parts must be {"type":"text","text":string}; this engine reads text only.`, param);
      })
      .join('');
  }
  throw invalidRequest(`${param} must be a string or an array of text parts.`, param);
}
