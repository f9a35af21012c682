import type { AssistantMessage, ChatFinishReason, Delta } from './chat-answer.ts';
import type { EngineHttpError } from './errors.ts';
import type { GenerationResult } from './generate.ts';

/** A Messages API answer and stream, field for field as Anthropic's API writes them (docs: the Messages API reference). */
export interface MessageIdentity {
  id: string;
  model: string;
}

/** The Messages API's stop reason for a finish reason (a matched stop sequence reads as `end_turn`: the engine does not say which matched). */
export function stopReasonOf(finishReason: ChatFinishReason): 'end_turn' | 'max_tokens' | 'tool_use' {
  return finishReason === 'length' ? 'max_tokens' : finishReason === 'tool_calls' ? 'tool_use' : 'end_turn';
}

/** A tool call's arguments as the `input` object; arguments cut short by `max_tokens` are not an object, and read as `{}`. */
function inputOf(args: string): unknown {
  try {
    const input: unknown = JSON.parse(args);
    return typeof input === 'object' && input !== null && !Array.isArray(input) ? input : {};
  } catch {
    return {};
  }
}

export function messageBody(identity: MessageIdentity, message: AssistantMessage, finishReason: ChatFinishReason, result: GenerationResult): object {
  const content: object[] = message.content === '' ? [] : [{ type: 'text', text: message.content }];
  for (const call of message.tool_calls ?? [])
    content.push({ type: 'tool_use', id: call.id, name: call.function.name, input: inputOf(call.function.arguments) });
  return {
    id: identity.id,
    type: 'message',
    role: 'assistant',
    model: identity.model,
    content,
    stop_reason: stopReasonOf(finishReason),
    stop_sequence: null,
    usage: { input_tokens: result.promptTokens, output_tokens: result.completionTokens },
  };
}

function event(type: string, body: Record<string, unknown> = {}): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...body })}\n\n`;
}

/** The Messages API's `error` event, for a stream that fails after it started. */
export function messagesErrorEvent(error: EngineHttpError): string {
  return event('error', { error: { type: error.status >= 500 ? 'api_error' : 'invalid_request_error', message: error.message } });
}

/** The Messages API's error body, for a request refused before anything was sent. */
export function messagesErrorBody(error: EngineHttpError): object {
  const type =
    error.status === 404 ? 'not_found_error' : error.status === 429 ? 'rate_limit_error' : error.status >= 500 ? 'api_error' : 'invalid_request_error';
  return { type: 'error', error: { type, message: error.message } };
}

/**
 * The events of a streamed answer: `message_start`, a `ping`, a content block per run of text or per tool call
 * (`content_block_start`, `text_delta` or `input_json_delta` deltas, `content_block_stop`), then `message_delta`
 * with the stop reason and output tokens, and `message_stop`.
 */
export class MessagesStream {
  private index = -1;
  private open: 'text' | 'tool' | undefined;

  constructor(private readonly identity: MessageIdentity) {}

  start(promptTokens: number): string {
    const message = {
      id: this.identity.id,
      type: 'message',
      role: 'assistant',
      model: this.identity.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
    };
    return event('message_start', { message: { ...message, usage: { input_tokens: promptTokens, output_tokens: 0 } } }) + event('ping');
  }

  /** The events for one chat delta: text extends the open text block; a call's first delta opens a tool_use block. */
  delta(delta: Delta): string {
    let out = '';
    if (delta.content !== undefined && delta.content !== '') {
      if (this.open !== 'text') out += this.openBlock('text', { type: 'text', text: '' });
      out += event('content_block_delta', { index: this.index, delta: { type: 'text_delta', text: delta.content } });
    }
    for (const call of delta.tool_calls ?? []) {
      if (call.id !== undefined) out += this.openBlock('tool', { type: 'tool_use', id: call.id, name: call.function.name ?? '', input: {} });
      if (call.function.arguments !== '')
        out += event('content_block_delta', { index: this.index, delta: { type: 'input_json_delta', partial_json: call.function.arguments } });
    }
    return out;
  }

  end(finishReason: ChatFinishReason, result: GenerationResult): string {
    return (
      this.closeBlock() +
      event('message_delta', { delta: { stop_reason: stopReasonOf(finishReason), stop_sequence: null }, usage: { output_tokens: result.completionTokens } }) +
      event('message_stop')
    );
  }

  private openBlock(kind: 'text' | 'tool', block: object): string {
    const closed = this.closeBlock();
    this.index++;
    this.open = kind;
    return closed + event('content_block_start', { index: this.index, content_block: block });
  }

  private closeBlock(): string {
    if (this.open === undefined) return '';
    this.open = undefined;
    return event('content_block_stop', { index: this.index });
  }
}
