import type { ChatModelFunctions } from 'node-llama-cpp';
import { invalidRequest } from './errors.ts';
import type { GrammarSchema } from './grammar-leaves.ts';
import { shownSchema } from './grammar-leaves.ts';
import { toGrammarSchema } from './json-schema.ts';
import { isObject, optionalBoolean } from './request-fields.ts';
import type { ToolCallMode } from './tool-calls.ts';

/**
 * What shape a chat answer must take, from `response_format`, `tools` and `tool_choice`, as vLLM
 * decides it: a named tool choice constrains the output to the tool's arguments, "required" to calls
 * of the declared tools and "auto" (the default with tools) to such calls or text, all three in the
 * model's own tool-call syntax (see tool-calls.ts) and winning over `response_format`;
 * `response_format` constrains it to JSON, else it is free text.
 */
export type AnswerShape =
  | { kind: 'text' }
  | { kind: 'json'; schema: GrammarSchema | undefined }
  | { kind: 'named-tool'; name: string; schema: GrammarSchema }
  | { kind: 'tools'; mode: ToolCallMode; tools: Tool[]; parallel: boolean };

export interface ToolsAndShape {
  shape: AnswerShape;
  /** The tools the chat template shows the model; empty when tool_choice is "none". */
  functions: ChatModelFunctions;
}

export interface Tool {
  name: string;
  description: string | undefined;
  parameters: GrammarSchema;
}

const NAME = /^[a-zA-Z0-9_-]{1,64}$/;
/** A function declared without parameters takes an empty object, as in vLLM. */
const NO_PARAMETERS: GrammarSchema = { schema: { type: 'object', properties: {} }, leaves: [] };

export function parseToolsAndShape(body: Record<string, unknown>): ToolsAndShape {
  const tools = parseTools(body.tools);
  const choice = parseToolChoice(body.tool_choice, tools);
  const parallel = optionalBoolean(body.parallel_tool_calls, 'parallel_tool_calls') ?? true;
  const responseFormat = parseResponseFormat(body.response_format);
  if (choice === 'none' || tools.length === 0) return { shape: responseFormat, functions: {} };
  const functions: ChatModelFunctions = Object.fromEntries(tools.map((t) => [t.name, { description: t.description, params: shownSchema(t.parameters) }]));
  if (choice === 'required' || choice === 'auto') return { shape: { kind: 'tools', mode: choice, tools, parallel }, functions };
  const tool = tools.find((t) => t.name === choice.name)!;
  return { shape: { kind: 'named-tool', name: tool.name, schema: tool.parameters }, functions };
}

function parseTools(value: unknown): Tool[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw invalidRequest('tools must be an array of {"type":"function","function":{...}} objects.', 'tools');
  const names = new Set<string>();
  return value.map((tool, i) => {
    const param = `tools[${i}]`;
    if (!isObject(tool) || tool.type !== 'function' || !isObject(tool.function)) {
      throw invalidRequest(`${param} must be {"type":"function","function":{"name",...}}; this engine calls functions only.`, param);
    }
    const { name, description, parameters } = tool.function;
    if (typeof name !== 'string' || !NAME.test(name)) {
      throw invalidRequest(`${param}.function.name must be 1 to 64 letters, digits, underscores or dashes.`, `${param}.function.name`);
    }
    if (names.has(name)) throw invalidRequest(`${param}.function.name "${name}" is declared twice.`, `${param}.function.name`);
    names.add(name);
    if (description !== undefined && typeof description !== 'string')
      throw invalidRequest(`${param}.function.description must be a string.`, `${param}.function.description`);
    return {
      name,
      description,
      parameters: parameters === undefined || parameters === null ? NO_PARAMETERS : toGrammarSchema(parameters, `${param}.function.parameters`),
    };
  });
}

function parseToolChoice(value: unknown, tools: readonly Tool[]): ToolCallMode | 'none' | { name: string } {
  // With tools and no tool_choice, vLLM (like OpenAI) reads "auto"; "auto" without tools is plain text.
  const choice = value ?? (tools.length > 0 ? 'auto' : 'none');
  if (choice === 'none' || (choice === 'auto' && tools.length === 0)) return 'none';
  if (choice === 'auto') return 'auto';
  if (choice === 'required') {
    if (tools.length === 0) throw invalidRequest('tool_choice "required" needs at least one tool in tools.', 'tool_choice');
    return 'required';
  }
  if (isObject(choice) && choice.type === 'function' && isObject(choice.function) && typeof choice.function.name === 'string') {
    const name = choice.function.name;
    if (!tools.some((t) => t.name === name)) throw invalidRequest(`tool_choice names the function "${name}", which tools does not declare.`, 'tool_choice');
    return { name };
  }
  throw invalidRequest('tool_choice must be "none", "auto", "required" or {"type":"function","function":{"name":...}}.', 'tool_choice');
}

/** `response_format`, on chat and plain completions alike. */
export function parseResponseFormat(value: unknown): Extract<AnswerShape, { kind: 'text' | 'json' }> {
  if (value === undefined || value === null) return { kind: 'text' };
  if (!isObject(value)) throw invalidRequest('response_format must be an object.', 'response_format');
  if (value.type === 'text') return { kind: 'text' };
  if (value.type === 'json_object') return { kind: 'json', schema: undefined };
  if (value.type === 'json_schema') {
    const spec = value.json_schema;
    if (!isObject(spec) || spec.schema === undefined) {
      throw invalidRequest('response_format.json_schema must be {"name":...,"schema":{...}}.', 'response_format.json_schema');
    }
    return { kind: 'json', schema: toGrammarSchema(spec.schema, 'response_format.json_schema.schema') };
  }
  throw invalidRequest('response_format.type must be "text", "json_object" or "json_schema".', 'response_format.type');
}
