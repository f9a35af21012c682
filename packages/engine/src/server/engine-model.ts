import { BOUNDED_JSON_OBJECT_GBNF } from './bounded-json-object.ts';
import { basename, extname } from 'node:path';
import {
  LlamaText,
  resolveChatWrapper,
  type ChatHistoryItem,
  type ChatModelFunctions,
  type ChatWrapper,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaGrammar,
  type LlamaModel,
  type Token,
} from 'node-llama-cpp';
import { loadLlama } from '../llama-runtime.ts';
import type { ChatMessage } from './chat-request.ts';
import { withLeaves, type GrammarSchema } from './grammar-leaves.ts';
import { toolCallsGrammar, toolCallSyntax, type ToolCallMode, type ToolCallSyntax } from './tool-calls.ts';

export interface EngineModelOptions {
  modelPath: string;
  /** Sequences decoded concurrently in one context. */
  parallel: number;
  threads: number;
  /** Context window of each sequence, in tokens. */
  contextSize: number;
}

/** A loaded GGUF ready to serve: its context's sequences, the chat template resolved once, and how to stop. */
export interface EngineModel {
  name: string;
  model: LlamaModel;
  context: LlamaContext;
  sequences: LlamaContextSequence[];
  contextSize: number;
  /** CPU threads the model decodes with (embedding contexts use as many). */
  threads: number;
  /**
   * Prompt tokens for a conversation, through the model's own chat template, ending where the answer
   * starts; `functions` are the tools the template shows the model (node-llama-cpp writes them in
   * the template's tool syntax, or as a system-prompt section for templates without one).
   */
  renderPrompt(messages: readonly ChatMessage[], functions?: ChatModelFunctions): Token[];
  /** The grammar that keeps sampled text valid JSON: any JSON, or JSON of this schema. */
  jsonGrammar(schema: GrammarSchema | undefined): Promise<LlamaGrammar>;
  /** How the model's chat template writes a tool call. */
  toolSyntax: ToolCallSyntax;
  /** The grammar of tool calls of these tools (or, in "auto" mode, of text instead), in the model's tool syntax. */
  toolsGrammar(tools: ReadonlyArray<{ name: string; parameters: GrammarSchema }>, mode: ToolCallMode, parallel: boolean): Promise<LlamaGrammar>;
  /** Tokens that end an answer besides llama.cpp's end-of-generation set (from the chat template). */
  stopTokens: ReadonlySet<Token>;
  /** Texts that end an answer (from the chat template). */
  stopTexts: readonly string[];
  dispose(): Promise<void>;
}

export async function loadEngineModel(options: EngineModelOptions): Promise<EngineModel> {
  const llama = await loadLlama();
  const model = await llama.loadModel({ modelPath: options.modelPath });
  const context = await model.createContext({
    sequences: options.parallel,
    contextSize: Math.min(options.contextSize, model.trainContextSize),
    threads: options.threads,
  });
  const sequences = Array.from({ length: options.parallel }, () => context.getSequence());
  const wrapper = resolveChatWrapper(model);
  const { stopTokens, stopTexts } = templateStops(wrapper, model);
  const toolSyntax = toolCallSyntax(wrapper);
  // The schema is known only at run time; the cast stops the compiler inferring an output type from it.
  const schemaGrammarText = async ({ schema, leaves }: GrammarSchema) =>
    withLeaves((await llama.createGrammarForJsonSchema(schema as { type: 'string' })).grammar, leaves);
  return {
    name: basename(options.modelPath, extname(options.modelPath)),
    model,
    context,
    sequences,
    contextSize: context.contextSize,
    threads: options.threads,
    renderPrompt: (messages, functions) => {
      const hasFunctions = functions !== undefined && Object.keys(functions).length > 0;
      const { contextText } = wrapper.generateContextState({
        chatHistory: toChatHistory(messages),
        ...(hasFunctions ? { availableFunctions: functions } : {}),
      });
      return contextText.tokenize(model.tokenizer);
    },
    jsonGrammar: async (schema) =>
      // node-llama-cpp's JSON grammars stop on blank lines (its root ends in four newlines), which the engine reads as the end.
      schema === undefined
        ? llama.createGrammar({ grammar: BOUNDED_JSON_OBJECT_GBNF })
        : llama.createGrammar({ grammar: await schemaGrammarText(schema), stopGenerationTriggers: [LlamaText('\n'.repeat(4))], trimWhitespaceSuffix: true }),
    toolSyntax,
    toolsGrammar: async (tools, mode, parallel) => {
      const compiled = await Promise.all(tools.map(async (tool) => ({ name: tool.name, grammar: await schemaGrammarText(tool.parameters) })));
      return llama.createGrammar({ grammar: toolCallsGrammar(toolSyntax, compiled, mode, parallel) });
    },
    stopTokens,
    stopTexts,
    dispose: async () => {
      await context.dispose();
      await model.dispose();
    },
  };
}

/** The conversation in node-llama-cpp's shape; an open model turn at the end is where the answer goes (or continues). */
function toChatHistory(messages: readonly ChatMessage[]): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = messages.map((m) => {
    if (m.role === 'assistant') {
      const calls = m.toolCalls.map((call) => ({
        type: 'functionCall' as const,
        name: call.name,
        params: jsonOrText(call.arguments),
        result: jsonOrText(call.result),
      }));
      return { type: 'model', response: m.content === '' && calls.length > 0 ? calls : [m.content, ...calls] };
    }
    return m.role === 'system' ? { type: 'system', text: m.content } : { type: 'user', text: m.content };
  });
  if (messages.at(-1)?.role !== 'assistant') history.push({ type: 'model', response: [] });
  return history;
}

/** Arguments and results are shown to the model as the JSON they hold, or as the text they are. */
function jsonOrText(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

function templateStops(wrapper: ChatWrapper, model: LlamaModel): { stopTokens: Set<Token>; stopTexts: string[] } {
  const stopTokens = new Set<Token>();
  const stopTexts: string[] = [];
  const { stopGenerationTriggers } = wrapper.generateContextState({ chatHistory: [{ type: 'model', response: [] }] });
  for (const trigger of stopGenerationTriggers) {
    if (trigger.values.every((value) => typeof value === 'string')) {
      stopTexts.push(trigger.values.join(''));
      continue;
    }
    const tokens = trigger.tokenize(model.tokenizer);
    if (tokens.length === 1) stopTokens.add(tokens[0]!);
  }
  return { stopTokens, stopTexts: stopTexts.filter((text) => text.length > 0) };
}
