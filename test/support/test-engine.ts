import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import {
  completionEvents,
  completionJson,
  embeddingsJson,
  messagesEvents,
  messagesJson,
  promptWords,
  responseEvents,
  responseJson,
  type Generation,
} from './test-engine-endpoints.ts';

/**
 * A small OpenAI-compatible engine for tests. It reproduces the byte formats of vLLM and of
 * llama.cpp's server (chat), of vLLM for /v1/completions, /v1/embeddings and /v1/responses, and of
 * Anthropic's Messages API as vLLM and llama.cpp serve it (/v1/messages, /v1/messages/count_tokens), streams included,
 * and misbehaves on demand.
 */
export type EngineFormat = 'vllm' | 'llamacpp';

export interface Misbehaviour {
  /** Wait this long before the status line. */
  firstByteDelayMs?: number;
  /** Wait this long between stream chunks. */
  chunkDelayMs?: number;
  /** Destroy the socket after this many stream events (role chunk included). */
  dropAfterEvents?: number;
  /** End the stream cleanly but without `data: [DONE]`. */
  omitDone?: boolean;
  /** Answer with this status and an error body. */
  status?: number;
  /** With `status`, the error message (default `engine says <status>`). */
  errorMessage?: string;
  /** With `status`, a Retry-After header (an engine that sheds load says when to come back). */
  retryAfter?: string;
  /** Answer 200 with a body that is not JSON. */
  invalidJson?: boolean;
  /** Never answer. */
  hang?: boolean;
  /** Stream exactly these bytes, one write each (with chunkDelayMs between), instead of the generated events. */
  rawStream?: Array<string | Buffer>;
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

export interface TestEngine {
  url: string;
  /** The OpenAI base URL to put in Sigil's config. */
  baseUrl: string;
  modelNames: string[];
  requests: RecordedRequest[];
  /** Requests whose client went away before the response ended. */
  aborted: number;
  /** Resolves at the next abort. */
  nextAbort(): Promise<void>;
  behaviour: Misbehaviour;
  /** The text every completion answers, one word per content chunk. */
  reply: string;
  close(): Promise<void>;
}

const GENERATING_PATHS = new Set(['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/responses', '/v1/messages', '/v1/messages/count_tokens']);

// real clock: the engine's configured latency (firstByteDelayMs, chunkDelayMs) is the slowness a test puts Sigil under
const latency = (ms: number) => new Promise((r) => setTimeout(r, ms));

function countPromptTokens(messages: unknown): number {
  if (!Array.isArray(messages)) return 0;
  return messages.reduce((n: number, m: { content?: unknown }) => n + (typeof m.content === 'string' ? m.content.split(/\s+/).filter(Boolean).length : 0), 0);
}

function words(text: string): string[] {
  return text.split(/(?<= )/);
}

function vllmError(status: number, message: string): string {
  const type = status === 404 ? 'NotFoundError' : status >= 500 ? 'InternalServerError' : 'BadRequestError';
  return JSON.stringify({ object: 'error', message, type, param: null, code: status });
}

function llamacppError(status: number, message: string): string {
  return JSON.stringify({
    error: { code: status, message, type: status === 404 ? 'not_found_error' : status >= 500 ? 'server_error' : 'invalid_request_error' },
  });
}

export async function startTestEngine(
  options: { format?: EngineFormat; modelNames?: string[]; contextWindow?: number; port?: number } = {},
): Promise<TestEngine> {
  const format = options.format ?? 'vllm';
  const contextWindow = options.contextWindow ?? 4096;
  const sockets = new Set<Socket>();
  let abortWaiters: Array<() => void> = [];

  const engine: TestEngine = {
    url: '',
    baseUrl: '',
    modelNames: options.modelNames ?? ['test-model'],
    requests: [],
    aborted: 0,
    nextAbort: () => new Promise((resolve) => abortWaiters.push(resolve)),
    behaviour: {},
    reply: 'Hello from the test engine, one word at a time.',
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  const errorBody = (status: number, message: string) => (format === 'vllm' ? vllmError(status, message) : llamacppError(status, message));

  async function generateFor(path: string, res: ServerResponse, body: Buffer): Promise<void> {
    const b = engine.behaviour;
    let finished = false;
    res.on('finish', () => (finished = true));
    res.on('close', () => {
      if (finished) return;
      engine.aborted++;
      const waiters = abortWaiters;
      abortWaiters = [];
      waiters.forEach((w) => w());
    });
    if (b.hang) return;
    if (b.firstByteDelayMs) await latency(b.firstByteDelayMs);
    if (b.status) {
      res
        .writeHead(b.status, { 'content-type': 'application/json', ...(b.retryAfter !== undefined ? { 'retry-after': b.retryAfter } : {}) })
        .end(errorBody(b.status, b.errorMessage ?? `engine says ${b.status}`));
      return;
    }
    if (b.invalidJson) {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"id": "chatcmpl-broken", "choices": [');
      return;
    }
    const request = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
    const model = request.model as string;
    if (!engine.modelNames.includes(model)) {
      res.writeHead(404, { 'content-type': 'application/json' }).end(errorBody(404, `The model \`${model}\` does not exist.`));
      return;
    }
    const isChat = path === '/v1/chat/completions';
    const promptTokens = isChat ? countPromptTokens(request.messages) : promptWords(request);
    if (path === '/v1/messages/count_tokens') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ input_tokens: promptTokens }));
      return;
    }
    if (path === '/v1/embeddings') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(embeddingsJson(model, request));
      return;
    }
    const maxTokens = ((request.max_tokens ?? request.max_output_tokens) as number | undefined) ?? Infinity;
    if (promptTokens + (Number.isFinite(maxTokens) ? maxTokens : 0) > contextWindow) {
      res
        .writeHead(400, { 'content-type': 'application/json' })
        .end(errorBody(400, `This model's maximum context length is ${contextWindow} tokens. However, you requested ${promptTokens + maxTokens} tokens.`));
      return;
    }
    const all = words(engine.reply);
    const pieces = all.slice(0, Math.min(all.length, maxTokens));
    const finish = pieces.length < all.length ? 'length' : 'stop';
    const id = `chatcmpl-${randomBytes(12).toString('hex')}`;
    const created = Math.floor(Date.now() / 1000);
    const usage = { prompt_tokens: promptTokens, total_tokens: promptTokens + pieces.length, completion_tokens: pieces.length };
    const generation: Generation = { model, promptTokens, pieces, finish };
    const includeUsage = (request.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;

    if (!isChat && request.stream !== true) {
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(path === '/v1/completions' ? completionJson(generation) : path === '/v1/messages' ? messagesJson(generation) : responseJson(generation, request));
      return;
    }
    if (request.stream !== true) {
      const text = pieces.join('');
      const json =
        format === 'vllm'
          ? JSON.stringify({
              id,
              object: 'chat.completion',
              created,
              model,
              choices: [
                {
                  index: 0,
                  message: { role: 'assistant', content: text, refusal: null, tool_calls: [] },
                  logprobs: null,
                  finish_reason: finish,
                  stop_reason: null,
                },
              ],
              usage,
              prompt_logprobs: null,
            })
          : JSON.stringify({
              choices: [{ finish_reason: finish, index: 0, message: { role: 'assistant', content: text } }],
              created,
              model,
              system_fingerprint: 'b5000-test',
              object: 'chat.completion',
              usage,
              id,
              timings: { prompt_n: promptTokens, predicted_n: pieces.length },
            });
      res.writeHead(200, { 'content-type': 'application/json' }).end(json);
      return;
    }

    let events: string[] = [];
    if (path === '/v1/completions') events = completionEvents(generation, includeUsage);
    else if (path === '/v1/responses') events = responseEvents(generation, request);
    else if (path === '/v1/messages') events = messagesEvents(generation);
    else if (format === 'vllm') {
      const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
        JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices, ...extra });
      events.push(chunk([{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }]));
      for (const p of pieces) events.push(chunk([{ index: 0, delta: { content: p }, logprobs: null, finish_reason: null }]));
      events.push(chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: finish, stop_reason: null }]));
      if (includeUsage) events.push(chunk([], { usage }));
    } else {
      const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
        JSON.stringify({ choices, created, id, model, system_fingerprint: 'b5000-test', object: 'chat.completion.chunk', ...extra });
      events.push(chunk([{ finish_reason: null, index: 0, delta: { role: 'assistant', content: null } }]));
      for (const p of pieces) events.push(chunk([{ finish_reason: null, index: 0, delta: { content: p } }]));
      events.push(chunk([{ finish_reason: finish, index: 0, delta: {} }]));
      if (includeUsage) events.push(chunk([], { usage, timings: { prompt_n: promptTokens, predicted_n: pieces.length } }));
    }
    if (isChat) events = events.map((e) => `data: ${e}\n\n`);

    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    res.flushHeaders();
    if (b.rawStream !== undefined) {
      for (const piece of b.rawStream) {
        if (res.destroyed) return;
        if (!res.write(piece)) await new Promise((r) => res.once('drain', r));
        if (b.chunkDelayMs) await latency(b.chunkDelayMs);
      }
      res.end();
      return;
    }
    let sent = 0;
    let written: Promise<unknown> = Promise.resolve();
    for (const event of events) {
      if (res.destroyed) return;
      if (b.dropAfterEvents !== undefined && sent >= b.dropAfterEvents) {
        // The events sent reach the client before the connection drops.
        await written;
        res.socket?.destroy();
        return;
      }
      written = new Promise((r) => res.write(event, r));
      sent++;
      if (b.chunkDelayMs) await latency(b.chunkDelayMs);
    }
    // Responses streams end with their response.completed event, without [DONE].
    if (b.omitDone || path === '/v1/responses' || path === '/v1/messages') res.end();
    else res.end('data: [DONE]\n\n');
  }

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const path = req.url ?? '/';
      engine.requests.push({ method: req.method ?? '', path, headers: req.headers, body });
      if (req.method === 'GET' && path === '/v1/models') {
        const data = engine.modelNames.map((id) => ({ id, object: 'model', created: 0, owned_by: format }));
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data }));
        return;
      }
      if (req.method === 'POST' && GENERATING_PATHS.has(path)) {
        void generateFor(path, res, body);
        return;
      }
      res.writeHead(404, { 'content-type': 'application/json' }).end(errorBody(404, 'not found'));
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  engine.url = `http://127.0.0.1:${port}`;
  engine.baseUrl = `${engine.url}/v1`;
  return engine;
}
