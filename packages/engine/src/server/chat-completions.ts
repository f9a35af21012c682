import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { answerMessage, StreamedAnswer, type Delta } from './chat-answer.ts';
import { withChatJob, type ChatJob } from './chat-job.ts';
import { parseChatRequest } from './chat-request.ts';
import { chunkBody, completionBody, sseEvent, usageChunkBody, type CompletionIdentity } from './chat-response.ts';
import { EngineHttpError, internalError } from './errors.ts';
import { generate } from './generate.ts';
import type { HandlerDeps } from './handler-deps.ts';

/**
 * POST /v1/chat/completions: validate, wait for a sequence, decode (under a JSON grammar when the
 * request asks for JSON or a tool call), answer as JSON or SSE.
 */
export async function handleChatCompletions(body: unknown, res: ServerResponse, deps: HandlerDeps): Promise<void> {
  const request = parseChatRequest(body);
  await withChatJob(request, res, deps, async (job) => {
    const identity: CompletionIdentity = {
      id: `chatcmpl-${randomBytes(16).toString('hex')}`,
      created: Math.floor(Date.now() / 1000),
      model: job.engine.name,
    };
    if (request.stream) return await streamCompletion(job, identity, res);
    let text = '';
    const result = await generate({ ...job, onText: (decoded) => (text += decoded) });
    if (result.finishReason === null) return;
    const { message, finishReason } = answerMessage(request.tools.shape, job.engine.toolSyntax, text, result.finishReason);
    const json = JSON.stringify(completionBody(identity, message, finishReason, result));
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) }).end(json);
  });
}

async function streamCompletion(job: ChatJob, identity: CompletionIdentity, res: ServerResponse): Promise<void> {
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
