import { randomBytes } from 'node:crypto';
import type { FinishReason } from './generate.ts';
import type { AnswerShape } from './structured-output.ts';
import { decodeCalls, startsAsCalls, type ToolCallSyntax } from './tool-calls.ts';

/**
 * How decoded text becomes what the client reads, by the answer's shape, as vLLM writes it:
 * text and JSON answers are `content`; a named tool choice is one tool call whose `arguments` is the
 * text as decoded (finish_reason stays `stop` or `length`); "required" calls, and "auto" answers that
 * begin with the call prefix, are one tool call per decoded call, with finish_reason `tool_calls` when
 * every call is complete, else the generation's own `length` (or `stop`) with the cut arguments as decoded.
 */

export type ChatFinishReason = FinishReason | 'tool_calls';

export interface ToolCallBody {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface AssistantMessage {
  role: 'assistant';
  content: string;
  tool_calls?: ToolCallBody[];
}

/** A stream delta; tool-call deltas carry `index`, and `id`, `type` and `name` on a call's first delta only. */
export interface Delta {
  role?: 'assistant';
  content?: string;
  tool_calls?: Array<{ id?: string; type?: 'function'; index: number; function: { name?: string; arguments: string } }>;
}

/** The message of an answer. */
export function answerMessage(
  shape: AnswerShape,
  syntax: ToolCallSyntax,
  text: string,
  finishReason: FinishReason,
): { message: AssistantMessage; finishReason: ChatFinishReason } {
  if (shape.kind === 'named-tool') return { message: { role: 'assistant', content: '', tool_calls: [toolCall(shape.name, text)] }, finishReason };
  if (shape.kind === 'tools' && (shape.mode === 'required' || startsAsCalls(syntax, text) === 'calls')) {
    const { calls, complete } = decodeCalls(syntax, toolNames(shape), text);
    return {
      message: { role: 'assistant', content: '', tool_calls: calls.map((call) => toolCall(call.name, call.arguments)) },
      finishReason: complete ? 'tool_calls' : finishReason,
    };
  }
  return { message: { role: 'assistant', content: text }, finishReason };
}

/**
 * The deltas of a streamed answer: text and a named call's arguments as they are decoded; "required"
 * and "auto" calls are sent whole once the answer ends. An "auto" answer is held back only while it
 * still reads as the start of the call prefix, then streams as text.
 */
export class StreamedAnswer {
  private readonly callId = toolCallId();
  private started = false;
  private buffered = '';
  private mode: 'text' | 'calls' | 'undecided';

  constructor(
    private readonly shape: AnswerShape,
    private readonly syntax: ToolCallSyntax,
  ) {
    this.mode = shape.kind !== 'tools' ? 'text' : shape.mode === 'required' ? 'calls' : 'undecided';
  }

  /** Deltas for newly decoded text; none while calls are still being decoded. */
  push(text: string): Delta[] {
    if (this.shape.kind === 'named-tool') return [this.namedDelta(text)];
    if (this.mode === 'text') return [{ content: text }];
    this.buffered += text;
    if (this.mode === 'undecided') {
      const decided = startsAsCalls(this.syntax, this.buffered);
      if (decided === 'undecided') return [];
      this.mode = decided;
      if (decided === 'text') return [{ content: this.buffered }];
    }
    return [];
  }

  /** The last deltas and the finish reason: `tool_calls` only when every call is complete. */
  end(finishReason: FinishReason): { deltas: Delta[]; finishReason: ChatFinishReason } {
    if (this.shape.kind !== 'tools' || this.mode === 'text') return { deltas: [], finishReason };
    if (this.mode === 'undecided') return { deltas: this.buffered === '' ? [] : [{ content: this.buffered }], finishReason };
    const { calls, complete } = decodeCalls(this.syntax, toolNames(this.shape), this.buffered);
    const deltas = calls.map((call, index) => ({ tool_calls: [{ ...toolCall(call.name, call.arguments), index }] }));
    return { deltas, finishReason: complete ? 'tool_calls' : finishReason };
  }

  private namedDelta(text: string): Delta {
    const first = !this.started;
    this.started = true;
    const name = (this.shape as { name: string }).name;
    return {
      tool_calls: [first ? { id: this.callId, type: 'function', index: 0, function: { name, arguments: text } } : { index: 0, function: { arguments: text } }],
    };
  }
}

function toolNames(shape: Extract<AnswerShape, { kind: 'tools' }>): string[] {
  return shape.tools.map((tool) => tool.name);
}

function toolCall(name: string, args: string): ToolCallBody {
  return { id: toolCallId(), type: 'function', function: { name, arguments: args } };
}

/** vLLM's tool call ids: `chatcmpl-tool-` and 32 random hex digits. */
function toolCallId(): string {
  return `chatcmpl-tool-${randomBytes(16).toString('hex')}`;
}
