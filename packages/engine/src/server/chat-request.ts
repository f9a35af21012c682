import { invalidRequest } from './errors.ts';
import { isObject, optionalBoolean, optionalInteger, optionalNumber, parseMaxTokens, parseStop, parseStreamOptions } from './request-fields.ts';
import { parseToolsAndShape, type ToolsAndShape } from './structured-output.ts';

/** A function the assistant called in an earlier turn, and what the tool answered. */
export interface ToolCall {
  id: string;
  name: string;
  /** The JSON text the assistant wrote. */
  arguments: string;
  /** The content of the `tool` message with this call's id. */
  result: string;
}

/** A turn of the conversation; `tool` messages are folded into the assistant turn whose calls they answer. */
export type ChatMessage = { role: 'system' | 'user'; content: string } | { role: 'assistant'; content: string; toolCalls: ToolCall[] };

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
  /** The shape the answer must take and the tools shown to the model. */
  tools: ToolsAndShape;
}

const ROLES = new Set<string>(['system', 'user', 'assistant', 'tool']);

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
    tools: parseToolsAndShape(body),
  };
}

function parseMessages(value: unknown): ChatMessage[] {
  if (!Array.isArray(value) || value.length === 0) throw invalidRequest('messages must be a non-empty array.', 'messages');
  const turns: ChatMessage[] = [];
  for (let i = 0; i < value.length; i++) {
    const { message, param } = checkedMessage(value, i);
    const content = parseContent(message.content, message.role, `${param}.content`);
    if (message.role === 'tool') throw invalidRequest(`${param} answers no tool call: tool messages follow the assistant message that made the calls.`, param);
    if (message.role !== 'assistant') {
      turns.push({ role: message.role as 'system' | 'user', content });
      continue;
    }
    const calls = parseToolCalls(message.tool_calls, `${param}.tool_calls`);
    const results = new Map<string, string>();
    while (results.size < calls.length && i + 1 < value.length && (value[i + 1] as { role?: unknown })?.role === 'tool') {
      const answer = checkedMessage(value, ++i);
      const id = answer.message.tool_call_id;
      if (typeof id !== 'string' || !calls.some((call) => call.id === id) || results.has(id)) {
        throw invalidRequest(
          `${answer.param}.tool_call_id must be the id of a call of the assistant message before it, answered once.`,
          `${answer.param}.tool_call_id`,
        );
      }
      results.set(id, parseContent(answer.message.content, 'tool', `${answer.param}.content`));
    }
    const unanswered = calls.findIndex((call) => !results.has(call.id));
    if (unanswered >= 0) {
      throw invalidRequest(
        `An assistant message with tool_calls must be followed by tool messages answering each tool_call_id; ${param}.tool_calls[${unanswered}] has none.`,
        `${param}.tool_calls[${unanswered}]`,
      );
    }
    turns.push({ role: 'assistant', content, toolCalls: calls.map((call) => ({ ...call, result: results.get(call.id)! })) });
  }
  return turns;
}

function checkedMessage(messages: unknown[], i: number): { message: Record<string, unknown> & { role: string }; param: string } {
  const param = `messages[${i}]`;
  const message = messages[i];
  if (!isObject(message)) throw invalidRequest(`${param} must be an object.`, param);
  if (typeof message.role !== 'string' || !ROLES.has(message.role)) {
    throw invalidRequest(`${param}.role must be one of system, user, assistant, tool.`, `${param}.role`);
  }
  return { message: message as Record<string, unknown> & { role: string }, param };
}

function parseToolCalls(value: unknown, param: string): Array<Omit<ToolCall, 'result'>> {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw invalidRequest(`${param} must be an array.`, param);
  return value.map((call, i) => {
    const at = `${param}[${i}]`;
    if (
      !isObject(call) ||
      typeof call.id !== 'string' ||
      !isObject(call.function) ||
      typeof call.function.name !== 'string' ||
      typeof call.function.arguments !== 'string'
    ) {
      throw invalidRequest(`${at} must be {"id","type":"function","function":{"name","arguments"}}.`, at);
    }
    return { id: call.id, name: call.function.name, arguments: call.function.arguments };
  });
}

/** A string, or an array of `{type: "text", text}` parts joined; an assistant message may have null or no content (tool calls). */
function parseContent(value: unknown, role: string, param: string): string {
  if (typeof value === 'string') return value;
  if ((value === null || value === undefined) && role === 'assistant') return '';
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
