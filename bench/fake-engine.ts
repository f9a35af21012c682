/**
 * A fast fake OpenAI-compatible engine in vLLM's byte format, so that any difference between peers is
 * the proxy's: JSON answers after a fixed response time, streams send one event per token at a fixed
 * cadence. `max_tokens` sets the number of content chunks; content chunk k carries the text `t<k> `,
 * so a client can check count and order. `POST /v1/messages` answers the same in Anthropic's Messages
 * format (a stream: `message_start`, one `content_block_delta` per token, ..., `message_stop`).
 *
 * Run alone: `node --import tsx bench/fake-engine.ts [--port N] [--chunk-ms 5] [--json-ms 0] [--processes N]`; it
 * prints one JSON line `{"url": ...}` when it listens (every process, with --processes).
 */
import cluster from 'node:cluster';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';

export interface FakeEngineOptions {
  host?: string;
  port?: number;
  /** Time between two stream events, in ms. */
  chunkMs: number;
  /** Time from the end of the request body to the JSON answer, in ms (0: at once). */
  jsonMs: number;
}

const DEFAULT_TOKENS = 16;
const CREATED = 1_700_000_000;
const MODELS = JSON.stringify({
  object: 'list',
  data: [{ id: 'bench-model', object: 'model', created: CREATED, owned_by: 'vllm', root: 'bench-model', parent: null, max_model_len: 131072 }],
});

let counter = 0;
const completionId = () => `chatcmpl-${(++counter).toString(16).padStart(32, '0')}`;

interface ChatRequest {
  model: string;
  stream: boolean;
  tokens: number;
  includeUsage: boolean;
  chunkMs: number | undefined;
}

function readRequest(body: Buffer): ChatRequest {
  const parsed = JSON.parse(body.toString('utf8')) as {
    model?: unknown;
    stream?: unknown;
    max_tokens?: unknown;
    stream_options?: { include_usage?: unknown };
    bench_chunk_ms?: unknown;
  };
  const tokens = typeof parsed.max_tokens === 'number' && parsed.max_tokens > 0 ? Math.min(parsed.max_tokens, 100_000) : DEFAULT_TOKENS;
  const chunkMs = typeof parsed.bench_chunk_ms === 'number' && parsed.bench_chunk_ms >= 0 ? parsed.bench_chunk_ms : undefined;
  return {
    model: String(parsed.model ?? 'bench-model'),
    stream: parsed.stream === true,
    tokens,
    includeUsage: parsed.stream_options?.include_usage === true,
    chunkMs,
  };
}

function messagesJsonBody(r: ChatRequest): string {
  let text = '';
  for (let k = 1; k <= r.tokens; k++) text += `t${k} `;
  return JSON.stringify({
    id: `msg_${(++counter).toString(16).padStart(24, '0')}`,
    type: 'message',
    role: 'assistant',
    model: r.model,
    content: [{ type: 'text', text }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 12, output_tokens: r.tokens },
  });
}

/** The Messages stream's events: all but the token deltas are sent at once; delta k at start + k * chunkMs. */
function sendMessagesStream(res: ServerResponse, r: ChatRequest, chunkMs: number): void {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
  const id = `msg_${(++counter).toString(16).padStart(24, '0')}`;
  res.write(
    `event: message_start\ndata: {"type":"message_start","message":{"id":"${id}","type":"message","role":"assistant","model":${JSON.stringify(r.model)},"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}\n\n` +
      'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n',
  );
  const start = performance.now();
  let k = 0;
  let timer: NodeJS.Timeout | undefined;
  const next = () => {
    if (res.destroyed) return;
    k++;
    res.write(`event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"t${k} "}}\n\n`);
    if (k === r.tokens) {
      res.end(
        'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n' +
          `event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":${r.tokens}}}\n\n` +
          'event: message_stop\ndata: {"type":"message_stop"}\n\n',
      );
      return;
    }
    timer = setTimeout(next, Math.max(0, start + (k + 1) * chunkMs - performance.now()));
  };
  timer = setTimeout(next, chunkMs);
  res.once('close', () => clearTimeout(timer));
}

function jsonBody(r: ChatRequest): string {
  let text = '';
  for (let k = 1; k <= r.tokens; k++) text += `t${k} `;
  const usage = { prompt_tokens: 12, total_tokens: 12 + r.tokens, completion_tokens: r.tokens };
  return JSON.stringify({
    id: completionId(),
    object: 'chat.completion',
    created: CREATED,
    model: r.model,
    choices: [
      { index: 0, message: { role: 'assistant', content: text, refusal: null, tool_calls: [] }, logprobs: null, finish_reason: 'stop', stop_reason: null },
    ],
    usage,
    prompt_logprobs: null,
  });
}

/** Writes the stream on an absolute schedule (event k at start + k * chunkMs), so timer drift does not accumulate. */
function sendStream(res: ServerResponse, r: ChatRequest, chunkMs: number): void {
  const head = `data: {"id":"${completionId()}","object":"chat.completion.chunk","created":${CREATED},"model":${JSON.stringify(r.model)},"choices":[`;
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
  res.write(`${head}{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n`);
  const start = performance.now();
  let k = 0;
  let timer: NodeJS.Timeout | undefined;
  const next = () => {
    if (res.destroyed) return;
    k++;
    res.write(`${head}{"index":0,"delta":{"content":"t${k} "},"logprobs":null,"finish_reason":null}]}\n\n`);
    if (k === r.tokens) {
      res.write(`${head}{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}\n\n`);
      if (r.includeUsage) res.write(`${head}],"usage":{"prompt_tokens":12,"total_tokens":${12 + r.tokens},"completion_tokens":${r.tokens}}}\n\n`);
      res.end('data: [DONE]\n\n');
      return;
    }
    timer = setTimeout(next, Math.max(0, start + (k + 1) * chunkMs - performance.now()));
  };
  timer = setTimeout(next, chunkMs);
  res.once('close', () => clearTimeout(timer));
}

export function createFakeEngine(options: FakeEngineOptions): Server {
  const handle = (req: IncomingMessage, res: ServerResponse, body: Buffer) => {
    if (req.method === 'GET' && req.url === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(MODELS) }).end(MODELS);
      return;
    }
    const messages = req.url === '/v1/messages';
    if (req.method !== 'POST' || (req.url !== '/v1/chat/completions' && !messages)) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"object":"error","message":"Not Found","type":"NotFoundError","param":null,"code":404}');
      return;
    }
    let r: ChatRequest;
    try {
      r = readRequest(body);
    } catch {
      res
        .writeHead(400, { 'content-type': 'application/json' })
        .end('{"object":"error","message":"invalid JSON","type":"BadRequestError","param":null,"code":400}');
      return;
    }
    if (r.stream) {
      (messages ? sendMessagesStream : sendStream)(res, r, r.chunkMs ?? options.chunkMs);
      return;
    }
    const answer = () => {
      const out = messages ? messagesJsonBody(r) : jsonBody(r);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) }).end(out);
    };
    if (options.jsonMs > 0) setTimeout(answer, options.jsonMs);
    else answer();
  };
  const server = createServer({ keepAliveTimeout: 120_000 }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handle(req, res, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
  });
  server.maxRequestsPerSocket = 0;
  return server;
}

export async function listenFakeEngine(options: FakeEngineOptions): Promise<{ server: Server; url: string }> {
  const server = createFakeEngine(options);
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return { server, url: `http://127.0.0.1:${port}` };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: '0' },
      'chunk-ms': { type: 'string', default: '5' },
      'json-ms': { type: 'string', default: '0' },
      // More than one process (node:cluster, sharing the port, which must then be given): an engine that keeps up with Sigil on every core.
      processes: { type: 'string', default: '1' },
    },
  });
  const processes = Number(values.processes);
  process.on('SIGTERM', () => process.exit(0));
  process.on('SIGINT', () => process.exit(0));
  if (processes > 1 && cluster.isPrimary) {
    if (Number(values.port) === 0) throw new Error('--processes needs a --port all of them listen on');
    for (let i = 0; i < processes; i++) cluster.fork();
    let listening = 0;
    cluster.on('listening', () => {
      if (++listening === processes) process.stdout.write(JSON.stringify({ url: `http://127.0.0.1:${values.port}` }) + '\n');
    });
    process.on('exit', () => {
      for (const worker of Object.values(cluster.workers ?? {})) worker?.kill();
    });
  } else {
    const { url } = await listenFakeEngine({ port: Number(values.port), chunkMs: Number(values['chunk-ms']), jsonMs: Number(values['json-ms']) });
    if (cluster.isPrimary) process.stdout.write(JSON.stringify({ url }) + '\n');
  }
}
