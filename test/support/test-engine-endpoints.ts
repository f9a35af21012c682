import { randomBytes } from 'node:crypto';

/**
 * Bodies and streams of vLLM's OpenAI server for /v1/completions, /v1/embeddings and /v1/responses,
 * byte for byte in field order, so the relay is tested on what a real engine sends.
 */

export interface Generation {
  model: string;
  promptTokens: number;
  pieces: string[];
  finish: 'stop' | 'length';
}

function wordCount(text: string): number {
  return text.split(/\s+/).filter(Boolean).length;
}

/** Prompt "tokens" of any request body the test engine serves: words of every string it carries. */
export function promptWords(request: Record<string, unknown>): number {
  const input = request.prompt ?? request.input ?? request.messages;
  const count = (value: unknown): number => {
    if (typeof value === 'string') return wordCount(value);
    if (Array.isArray(value)) return value.reduce((n: number, v) => n + count(v), 0);
    if (typeof value === 'object' && value !== null) return count((value as { content?: unknown }).content ?? (value as { text?: unknown }).text);
    return 0;
  };
  return count(input);
}

function vllmUsage(g: Generation) {
  return { prompt_tokens: g.promptTokens, total_tokens: g.promptTokens + g.pieces.length, completion_tokens: g.pieces.length, prompt_tokens_details: null };
}

export function completionJson(g: Generation): string {
  const id = `cmpl-${randomBytes(12).toString('hex')}`;
  const created = Math.floor(Date.now() / 1000);
  return JSON.stringify({
    id,
    object: 'text_completion',
    created,
    model: g.model,
    choices: [{ index: 0, text: g.pieces.join(''), logprobs: null, finish_reason: g.finish, stop_reason: null, prompt_logprobs: null }],
    usage: vllmUsage(g),
    kv_transfer_params: null,
  });
}

/** The `data:` payloads of a completions stream, [DONE] excluded. */
export function completionEvents(g: Generation, includeUsage: boolean): string[] {
  const id = `cmpl-${randomBytes(12).toString('hex')}`;
  const created = Math.floor(Date.now() / 1000);
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
    JSON.stringify({ id, object: 'text_completion', created, model: g.model, choices, ...extra });
  const events = g.pieces.map((text) => chunk([{ index: 0, text, logprobs: null, finish_reason: null, stop_reason: null }]));
  events.push(chunk([{ index: 0, text: '', logprobs: null, finish_reason: g.finish, stop_reason: null }]));
  if (includeUsage) events.push(chunk([], { usage: vllmUsage(g) }));
  return events.map((e) => `data: ${e}\n\n`);
}

/** A deterministic vector per input text, so tests can compare what the client decoded. */
export function embeddingOf(text: string, dimensions = 8): number[] {
  const seed = [...text].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 7);
  return Array.from({ length: dimensions }, (_, i) => Math.fround(Math.sin(seed + i) / 2));
}

export function embeddingsJson(model: string, request: Record<string, unknown>): string {
  const inputs = typeof request.input === 'string' ? [request.input] : Array.isArray(request.input) ? request.input.map(String) : [];
  const base64 = request.encoding_format === 'base64';
  const tokens = inputs.reduce((n, i) => n + wordCount(i), 0);
  return JSON.stringify({
    id: `embd-${randomBytes(12).toString('hex')}`,
    object: 'list',
    created: Math.floor(Date.now() / 1000),
    model,
    data: inputs.map((input, index) => {
      const vector = embeddingOf(input);
      return { index, object: 'embedding', embedding: base64 ? Buffer.from(Float32Array.from(vector).buffer).toString('base64') : vector };
    }),
    usage: { prompt_tokens: tokens, total_tokens: tokens, completion_tokens: 0, prompt_tokens_details: null },
  });
}

function responseObject(
  g: Generation,
  id: string,
  messageId: string,
  createdAt: number,
  status: 'in_progress' | 'completed',
  request: Record<string, unknown>,
) {
  const done = status === 'completed';
  return {
    id,
    created_at: createdAt,
    incomplete_details: null,
    instructions: request.instructions ?? null,
    metadata: null,
    model: g.model,
    object: 'response',
    output: done
      ? [
          {
            id: messageId,
            content: [{ annotations: [], text: g.pieces.join(''), type: 'output_text', logprobs: null }],
            role: 'assistant',
            status: 'completed',
            type: 'message',
          },
        ]
      : [],
    parallel_tool_calls: true,
    temperature: request.temperature ?? 1.0,
    tool_choice: 'auto',
    tools: [],
    top_p: 1.0,
    background: false,
    max_output_tokens: request.max_output_tokens ?? null,
    max_tool_calls: null,
    previous_response_id: null,
    prompt: null,
    reasoning: null,
    service_tier: 'auto',
    status,
    text: null,
    top_logprobs: null,
    truncation: 'disabled',
    usage: done
      ? {
          input_tokens: g.promptTokens,
          input_tokens_details: { cached_tokens: 0 },
          output_tokens: g.pieces.length,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: g.promptTokens + g.pieces.length,
        }
      : null,
    user: null,
  };
}

export function responseJson(g: Generation, request: Record<string, unknown>): string {
  return JSON.stringify(
    responseObject(g, `resp_${randomBytes(16).toString('hex')}`, `msg_${randomBytes(16).toString('hex')}`, Math.floor(Date.now() / 1000), 'completed', request),
  );
}

/** A Responses API stream as vLLM writes it: `event:` and `data:` lines, sequence numbers, no [DONE]. */
export function responseEvents(g: Generation, request: Record<string, unknown>): string[] {
  const id = `resp_${randomBytes(16).toString('hex')}`;
  const itemId = `msg_${randomBytes(16).toString('hex')}`;
  const createdAt = Math.floor(Date.now() / 1000);
  let sequence = 0;
  const event = (type: string, body: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ ...body, type, sequence_number: sequence++ })}\n\n`;
  const text = g.pieces.join('');
  const part = (t: string) => ({ annotations: [], text: t, type: 'output_text', logprobs: null });
  const item = (status: string, t: string) => ({
    id: itemId,
    content: t === '' && status === 'in_progress' ? [] : [part(t)],
    role: 'assistant',
    status,
    type: 'message',
  });
  return [
    event('response.created', { response: responseObject(g, id, itemId, createdAt, 'in_progress', request) }),
    event('response.in_progress', { response: responseObject(g, id, itemId, createdAt, 'in_progress', request) }),
    event('response.output_item.added', { item: item('in_progress', ''), output_index: 0 }),
    event('response.content_part.added', { content_index: 0, item_id: itemId, output_index: 0, part: part('') }),
    ...g.pieces.map((delta) => event('response.output_text.delta', { content_index: 0, delta, item_id: itemId, output_index: 0, logprobs: [] })),
    event('response.output_text.done', { content_index: 0, item_id: itemId, output_index: 0, text, logprobs: [] }),
    event('response.content_part.done', { content_index: 0, item_id: itemId, output_index: 0, part: part(text) }),
    event('response.output_item.done', { item: item('completed', text), output_index: 0 }),
    event('response.completed', { response: responseObject(g, id, itemId, createdAt, 'completed', request) }),
  ];
}

/** A Messages API answer as vLLM's Anthropic endpoint and llama.cpp's server write it. */
export function messagesJson(g: Generation): string {
  return JSON.stringify({
    id: `msg_${randomBytes(12).toString('hex')}`,
    type: 'message',
    role: 'assistant',
    content: [{ type: 'text', text: g.pieces.join('') }],
    model: g.model,
    stop_reason: g.finish === 'stop' ? 'end_turn' : 'max_tokens',
    stop_sequence: null,
    usage: { input_tokens: g.promptTokens, output_tokens: g.pieces.length },
  });
}

/** A Messages API stream: `event:` and `data:` lines, a ping, the text as deltas, ended by `message_stop` (no [DONE]). */
export function messagesEvents(g: Generation): string[] {
  const id = `msg_${randomBytes(12).toString('hex')}`;
  const event = (type: string, body: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...body })}\n\n`;
  return [
    event('message_start', {
      message: {
        id,
        type: 'message',
        role: 'assistant',
        content: [],
        model: g.model,
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: g.promptTokens, output_tokens: 1 },
      },
    }),
    event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    event('ping', {}),
    ...g.pieces.map((text) => event('content_block_delta', { index: 0, delta: { type: 'text_delta', text } })),
    event('content_block_stop', { index: 0 }),
    event('message_delta', {
      delta: { stop_reason: g.finish === 'stop' ? 'end_turn' : 'max_tokens', stop_sequence: null },
      usage: { output_tokens: g.pieces.length },
    }),
    event('message_stop', {}),
  ];
}
