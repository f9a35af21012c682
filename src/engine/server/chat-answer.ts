import { randomBytes } from 'node:crypto';
import { invalidRequest } from './errors.ts';
import type { FinishReason } from './generate.ts';
import type { AnswerShape } from './structured-output.ts';

/**
 * How decoded text becomes what the client reads, by the answer's shape, as vLLM writes it:
 * text and JSON answers are `content`; a named tool choice is one tool call whose `arguments` is the
 * text as decoded (finish_reason stays `stop` or `length`); "required" is the decoded list of
 * `{name, parameters}`, one tool call each, with finish_reason `tool_calls`.
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

/** The message of a JSON answer. */
export function answerMessage(shape: AnswerShape, text: string, finishReason: FinishReason): { message: AssistantMessage; finishReason: ChatFinishReason } {
  if (shape.kind === 'named-tool') return { message: { role: 'assistant', content: '', tool_calls: [toolCall(shape.name, text)] }, finishReason };
  if (shape.kind === 'required-tools')
    return { message: { role: 'assistant', content: '', tool_calls: requiredCalls(text, finishReason) }, finishReason: 'tool_calls' };
  return { message: { role: 'assistant', content: text }, finishReason };
}

/** The deltas of a streamed answer: text as it is decoded, except "required" calls, which are sent whole once their list is complete. */
export class StreamedAnswer {
  private readonly callId = toolCallId();
  private started = false;
  private buffered = '';

  constructor(private readonly shape: AnswerShape) {}

  /** Deltas for newly decoded text; none while "required" calls are still being decoded. */
  push(text: string): Delta[] {
    if (this.shape.kind === 'required-tools') {
      this.buffered += text;
      return [];
    }
    if (this.shape.kind !== 'named-tool') return [{ content: text }];
    const first = !this.started;
    this.started = true;
    return [
      {
        tool_calls: [
          first
            ? { id: this.callId, type: 'function', index: 0, function: { name: this.shape.name, arguments: text } }
            : { index: 0, function: { arguments: text } },
        ],
      },
    ];
  }

  /** The last deltas and the finish reason; throws a 400 when "required" calls were cut before their JSON ended. */
  end(finishReason: FinishReason): { deltas: Delta[]; finishReason: ChatFinishReason } {
    if (this.shape.kind !== 'required-tools') return { deltas: [], finishReason };
    const deltas = requiredCalls(this.buffered, finishReason).map((call, index) => ({ tool_calls: [{ ...call, index }] }));
    return { deltas, finishReason: 'tool_calls' };
  }
}

function requiredCalls(text: string, finishReason: FinishReason): ToolCallBody[] {
  let calls: Array<{ name: string; parameters: unknown }>;
  try {
    calls = JSON.parse(text) as typeof calls;
  } catch {
    throw invalidRequest(
      finishReason === 'length'
        ? 'The tool calls were cut at max_tokens before their JSON ended; raise max_tokens.'
        : 'The model ended before its tool calls were complete JSON.',
      finishReason === 'length' ? 'max_tokens' : null,
    );
  }
  return calls.map((call) => toolCall(call.name, JSON.stringify(call.parameters)));
}

function toolCall(name: string, args: string): ToolCallBody {
  return { id: toolCallId(), type: 'function', function: { name, arguments: args } };
}

/** vLLM's tool call ids: `chatcmpl-tool-` and 32 random hex digits. */
function toolCallId(): string {
  return `chatcmpl-tool-${randomBytes(16).toString('hex')}`;
}
