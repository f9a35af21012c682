import { parseChatRequest, type ChatRequest } from './chat-request.ts';
import { invalidRequest } from './errors.ts';
import { isObject } from './request-fields.ts';

/**
 * Anthropic's Messages API request (POST /v1/messages) read as the chat request it means, so one generation path
 * serves both, as vLLM's Anthropic endpoint does: `system` (a string or text blocks) becomes the system turn, text
 * blocks the turn's text, an assistant's `tool_use` blocks its tool calls and a user's `tool_result` blocks the
 * tool answers; `tools` ({name, description, input_schema}), `tool_choice` (auto, any, tool, none), `max_tokens`,
 * `stop_sequences`, `temperature`, `top_p` and `stream` map one to one. Images and documents are refused (text models).
 */
export function parseMessagesRequest(body: unknown): ChatRequest {
  if (!isObject(body)) throw invalidRequest('The request body must be a JSON object.');
  if (typeof body.max_tokens !== 'number') throw invalidRequest('max_tokens: Field required', 'max_tokens');
  const chat: Record<string, unknown> = {
    model: body.model,
    messages: [...systemTurn(body.system), ...conversation(body.messages)],
    max_tokens: body.max_tokens,
  };
  if (body.stream !== undefined) chat.stream = body.stream;
  if (body.temperature !== undefined) chat.temperature = body.temperature;
  if (body.top_p !== undefined) chat.top_p = body.top_p;
  if (body.stop_sequences !== undefined) chat.stop = body.stop_sequences;
  if (body.tools !== undefined) chat.tools = tools(body.tools);
  if (body.tool_choice !== undefined) Object.assign(chat, toolChoice(body.tool_choice));
  return parseChatRequest(chat);
}

/** The text of a string or of text blocks; any other block is refused, naming where it is. */
function textOf(value: unknown, param: string): string {
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) throw invalidRequest(`${param} must be a string or an array of content blocks.`, param);
  return value
    .map((block: unknown, i) => {
      if (!isObject(block) || block.type !== 'text' || typeof block.text !== 'string') {
        throw invalidRequest(`${param}[${i}] must be a text block ({"type":"text","text":...}); this engine reads text only.`, `${param}[${i}]`);
      }
      return block.text;
    })
    .join('');
}

function systemTurn(system: unknown): object[] {
  return system === undefined ? [] : [{ role: 'system', content: textOf(system, 'system') }];
}

function conversation(messages: unknown): object[] {
  if (!Array.isArray(messages) || messages.length === 0) throw invalidRequest('messages must be a non-empty array.', 'messages');
  const turns: object[] = [];
  messages.forEach((message: unknown, i) => {
    const param = `messages[${i}]`;
    if (!isObject(message) || (message.role !== 'user' && message.role !== 'assistant')) {
      throw invalidRequest(`${param}.role must be "user" or "assistant".`, `${param}.role`);
    }
    const { content } = message;
    if (typeof content === 'string') return void turns.push({ role: message.role, content });
    if (!Array.isArray(content)) throw invalidRequest(`${param}.content must be a string or an array of content blocks.`, `${param}.content`);
    const text: string[] = [];
    const calls: object[] = [];
    content.forEach((block: unknown, j) => {
      const at = `${param}.content[${j}]`;
      if (!isObject(block)) throw invalidRequest(`${at} must be a content block.`, at);
      if (block.type === 'text' && typeof block.text === 'string') text.push(block.text);
      else if (block.type === 'tool_use' && message.role === 'assistant' && typeof block.id === 'string' && typeof block.name === 'string') {
        calls.push({ id: block.id, type: 'function', function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) } });
      } else if (block.type === 'tool_result' && message.role === 'user' && typeof block.tool_use_id === 'string') {
        turns.push({ role: 'tool', tool_call_id: block.tool_use_id, content: block.content === undefined ? '' : textOf(block.content, `${at}.content`) });
      } else throw invalidRequest(`${at} is not a block this engine reads (text; tool_use from the assistant; tool_result from the user).`, at);
    });
    if (message.role === 'assistant') turns.push({ role: 'assistant', content: text.join(''), ...(calls.length > 0 ? { tool_calls: calls } : {}) });
    else if (text.length > 0) turns.push({ role: 'user', content: text.join('') });
  });
  return turns;
}

function tools(value: unknown): object[] {
  if (!Array.isArray(value)) throw invalidRequest('tools must be an array of {"name","description","input_schema"} objects.', 'tools');
  return value.map((tool: unknown, i) => {
    if (!isObject(tool)) throw invalidRequest(`tools[${i}] must be an object.`, `tools[${i}]`);
    return { type: 'function', function: { name: tool.name, description: tool.description, parameters: tool.input_schema } };
  });
}

function toolChoice(value: unknown): Record<string, unknown> {
  if (!isObject(value)) throw invalidRequest('tool_choice must be an object such as {"type":"auto"}.', 'tool_choice');
  const parallel = value.disable_parallel_tool_use === true ? { parallel_tool_calls: false } : {};
  if (value.type === 'auto') return { tool_choice: 'auto', ...parallel };
  if (value.type === 'any') return { tool_choice: 'required', ...parallel };
  if (value.type === 'none') return { tool_choice: 'none' };
  if (value.type === 'tool' && typeof value.name === 'string') return { tool_choice: { type: 'function', function: { name: value.name } }, ...parallel };
  throw invalidRequest('tool_choice.type must be "auto", "any", "tool" (with a name) or "none".', 'tool_choice');
}
