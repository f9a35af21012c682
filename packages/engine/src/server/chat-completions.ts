import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { LlamaContextSequence } from 'node-llama-cpp';
import { answerMessage, StreamedAnswer, type Delta } from './chat-answer.ts';
import { parseChatRequest, type ChatRequest } from './chat-request.ts';
import { chunkBody, completionBody, sseEvent, usageChunkBody, type CompletionIdentity } from './chat-response.ts';
import type { EngineModel } from './engine-model.ts';
import { contextLengthExceeded, EngineHttpError, internalError } from './errors.ts';
import { generate, type GenerationJob } from './generate.ts';
import type { SequencePool } from './sequence-pool.ts';

export interface ChatCompletionsDeps {
  engine: EngineModel;
  pool: SequencePool<LlamaContextSequence>;
}

/**
 * POST /v1/chat/completions: validate, wait for a sequence, decode (under a JSON grammar when the
 * request asks for JSON or a tool call), answer as JSON or SSE.
 */
export async function handleChatCompletions(body: unknown, res: ServerResponse, deps: ChatCompletionsDeps): Promise<void> {
  const { engine, pool } = deps;
  const request = parseChatRequest(body);
  const { shape, functions } = request.tools;
  const prompt = engine.renderPrompt(request.messages, functions);
  const maxTokens = completionBudget(prompt.length, request, engine.contextSize);
  const grammar =
    shape.kind === 'text'
      ? undefined
      : shape.kind === 'tools'
        ? await engine.toolsGrammar(shape.tools, shape.mode, shape.parallel)
        : await engine.jsonGrammar(shape.schema);

  const aborter = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) aborter.abort();
  });
  const sequence = await pool.acquire(aborter.signal);
  try {
    const identity: CompletionIdentity = {
      id: `chatcmpl-${randomBytes(16).toString('hex')}`,
      created: Math.floor(Date.now() / 1000),
      model: engine.name,
    };
    const job = { engine, sequence, prompt, request, maxTokens, grammar, signal: aborter.signal };
    if (request.stream) await streamCompletion(job, identity, res);
    else {
      let text = '';
      const result = await generate({ ...job, onText: (decoded) => (text += decoded) });
      if (result.finishReason === null) return;
      const { message, finishReason } = answerMessage(shape, engine.toolSyntax, text, result.finishReason);
      const json = JSON.stringify(completionBody(identity, message, finishReason, result));
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) }).end(json);
    }
  } finally {
    pool.release(sequence);
  }
}

async function streamCompletion(job: Omit<GenerationJob<ChatRequest>, 'onText'>, identity: CompletionIdentity, res: ServerResponse): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
  res.write(sseEvent(chunkBody(identity, { role: 'assistant', content: '' })));
  const answer = new StreamedAnswer(job.request.tools.shape, job.engine.toolSyntax);
  const send = (deltas: Delta[]) => deltas.forEach((delta) => res.write(sseEvent(chunkBody(identity, delta))));
  try {
    const result = await generate({ ...job, onText: (text) => send(answer.push(text)) });
    if (result.finishReason === null) return;
    const { deltas, finishReason } = answer.end(result.finishReason);
    send(deltas);
    res.write(sseEvent(chunkBody(identity, {}, finishReason)));
    if (job.request.includeUsage) res.write(sseEvent(usageChunkBody(identity, result)));
    res.end(sseEvent('[DONE]'));
  } catch (error) {
    // Headers are sent: a failure becomes an error event, as vLLM ends a stream it cannot finish.
    if (error instanceof EngineHttpError) return void res.end(sseEvent(error.toJSON()));
    process.stderr.write(`sigil engine: generation failed: ${(error as Error).message}\n`);
    res.end(sseEvent(internalError().toJSON()));
  }
}

/** Tokens the answer may take: what the client asked for, else all the context the prompt leaves. */
export function completionBudget(promptTokens: number, request: ChatRequest, contextSize: number): number {
  if (promptTokens >= contextSize) {
    throw contextLengthExceeded(`This model's maximum context length is ${contextSize} tokens. However, your messages resulted in ${promptTokens} tokens.`);
  }
  if (request.maxTokens === undefined) return contextSize - promptTokens;
  if (promptTokens + request.maxTokens > contextSize) {
    throw contextLengthExceeded(
      `This model's maximum context length is ${contextSize} tokens. However, you requested ${promptTokens + request.maxTokens} tokens ` +
        `(${promptTokens} in the messages, ${request.maxTokens} in the completion). Please reduce the length of the messages or completion.`,
    );
  }
  return request.maxTokens;
}
