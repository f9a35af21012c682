import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { LlamaEmbeddingContext, Token } from 'node-llama-cpp';
import type { EngineModel } from './engine-model.ts';
import { contextLengthExceeded, invalidRequest } from './errors.ts';
import { isObject } from './request-fields.ts';

type EmbeddingInput = string | Token[];

interface EmbeddingsRequest {
  inputs: EmbeddingInput[];
  encoding: 'float' | 'base64';
}

const MAX_INPUTS = 256;

function isTokenList(value: unknown): value is number[] {
  return Array.isArray(value) && value.length > 0 && value.every((t) => Number.isSafeInteger(t) && (t as number) >= 0);
}

/** input: a string, a list of strings, a list of token ids, or a list of such lists (OpenAI's four forms). */
function parseEmbeddingsRequest(body: unknown): EmbeddingsRequest {
  if (!isObject(body)) throw invalidRequest('The request body must be a JSON object.');
  if (body.model !== undefined && typeof body.model !== 'string') throw invalidRequest('model must be a string.', 'model');
  if (body.dimensions !== undefined && body.dimensions !== null) throw invalidRequest('dimensions is not supported by this engine.', 'dimensions');
  const format = body.encoding_format ?? 'float';
  if (format !== 'float' && format !== 'base64') throw invalidRequest('encoding_format must be "float" or "base64".', 'encoding_format');
  const input = body.input;
  let inputs: EmbeddingInput[];
  if (typeof input === 'string') inputs = [input];
  else if (isTokenList(input)) inputs = [input as Token[]];
  else if (Array.isArray(input) && input.length > 0 && input.every((i) => typeof i === 'string' || isTokenList(i))) inputs = input as EmbeddingInput[];
  else throw invalidRequest('input must be a string, a list of strings, a list of token ids or a list of such lists.', 'input');
  if (inputs.length > MAX_INPUTS) throw invalidRequest(`input may hold at most ${MAX_INPUTS} items.`, 'input');
  if (inputs.some((i) => i.length === 0)) throw invalidRequest('input items must not be empty.', 'input');
  return { inputs, encoding: format };
}

/** base64 of the vector as little-endian float32, as OpenAI and vLLM encode `encoding_format: "base64"`. */
function base64Vector(vector: readonly number[]): string {
  const floats = Float32Array.from(vector);
  return Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength).toString('base64');
}

/**
 * POST /v1/embeddings over the loaded model. The embedding context is made on first use and serves
 * one request at a time, so a chat-sized model pays for it only when embeddings are asked for.
 */
export function createEmbeddingsHandler(engine: EngineModel, threads: number) {
  let context: Promise<LlamaEmbeddingContext> | undefined;
  let queue: Promise<unknown> = Promise.resolve();

  return async function handleEmbeddings(body: unknown, res: ServerResponse): Promise<void> {
    const request = parseEmbeddingsRequest(body);
    const tokens = request.inputs.map((input) => (typeof input === 'string' ? engine.model.tokenize(input) : input));
    const longest = Math.max(...tokens.map((t) => t.length));
    if (longest > engine.contextSize) {
      throw contextLengthExceeded(`This model's maximum context length is ${engine.contextSize} tokens. However, an input has ${longest} tokens.`);
    }
    const run = queue.then(async () => {
      context ??= engine.model.createEmbeddingContext({ contextSize: engine.contextSize, threads });
      const ctx = await context;
      const vectors: Array<readonly number[]> = [];
      for (const input of tokens) vectors.push((await ctx.getEmbeddingFor(input)).vector);
      return vectors;
    });
    queue = run.catch(() => undefined);
    const vectors = await run;
    const promptTokens = tokens.reduce((sum, t) => sum + t.length, 0);
    const json = JSON.stringify({
      id: `embd-${randomBytes(16).toString('hex')}`,
      object: 'list',
      created: Math.floor(Date.now() / 1000),
      model: engine.name,
      data: vectors.map((vector, index) => ({ index, object: 'embedding', embedding: request.encoding === 'base64' ? base64Vector(vector) : vector })),
      usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
    });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) }).end(json);
  };
}
