import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { LlamaContextSequence } from 'node-llama-cpp';
import { handleChatCompletions } from './chat-completions.ts';
import { handleCompletions } from './completions.ts';
import { handleMessages } from './messages.ts';
import { createEmbeddingsHandler } from './embeddings.ts';
import type { EngineModel } from './engine-model.ts';
import { bodyTooLarge, EngineHttpError, internalError, invalidJson, methodNotAllowed, notFound } from './errors.ts';
import { SequencePool } from './sequence-pool.ts';

export interface EngineServerOptions {
  /** Requests that may wait for a free sequence; more are answered 429. */
  maxQueued: number;
  maxBodyBytes: number;
}

/** The engine's OpenAI-compatible HTTP API over one loaded model. Logs nothing of prompts or completions. */
export function createEngineServer(engine: EngineModel, options: EngineServerOptions): Server {
  const pool = new SequencePool<LlamaContextSequence>(engine.sequences, options.maxQueued);
  const created = Math.floor(Date.now() / 1000);
  const handleEmbeddings = createEmbeddingsHandler(engine, engine.threads);
  const posts: Record<string, (body: unknown, res: ServerResponse) => Promise<void>> = {
    '/v1/chat/completions': (body, res) => handleChatCompletions(body, res, { engine, pool }),
    '/v1/completions': (body, res) => handleCompletions(body, res, { engine, pool }),
    '/v1/embeddings': handleEmbeddings,
    '/v1/messages': (body, res) => handleMessages(body, res, { engine, pool }),
  };

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://engine').pathname;
    if (path === '/health') {
      if (req.method !== 'GET' && req.method !== 'HEAD') throw methodNotAllowed(req.method ?? '', path, 'GET');
      return sendJson(res, 200, { status: 'ok' });
    }
    if (path === '/v1/models') {
      if (req.method !== 'GET') throw methodNotAllowed(req.method ?? '', path, 'GET');
      return sendJson(res, 200, {
        object: 'list',
        data: [{ id: engine.name, object: 'model', created, owned_by: 'sigil', root: engine.name, parent: null, max_model_len: engine.contextSize }],
      });
    }
    const post = Object.hasOwn(posts, path) ? posts[path] : undefined;
    if (post !== undefined) {
      if (req.method !== 'POST') throw methodNotAllowed(req.method ?? '', path, 'POST');
      return post(await readJsonBody(req, options.maxBodyBytes), res);
    }
    throw notFound(path);
  }

  return createServer((req, res) => {
    route(req, res).catch((error: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (error instanceof EngineHttpError) return sendJson(res, error.status, error.toJSON(), error.headers);
      if (res.destroyed) return;
      process.stderr.write(`sigil engine: ${(error as Error).message}\n`);
      const failure = internalError();
      sendJson(res, failure.status, failure.toJSON());
    });
  });
}

function sendJson(res: ServerResponse, status: number, body: object, headers: Record<string, string> = {}): void {
  const json = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json), ...headers }).end(json);
}

/** The body parsed as JSON whatever its content-type says, as vLLM and llama.cpp's server do (curl -d sends a form type). */
async function readJsonBody(req: IncomingMessage, limit: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw bodyTooLarge(limit);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    throw invalidJson();
  }
}
