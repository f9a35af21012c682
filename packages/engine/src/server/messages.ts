import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { answerMessage, StreamedAnswer } from './chat-answer.ts';
import type { ChatRequest } from './chat-request.ts';
import type { ChatCompletionsDeps } from './chat-completions.ts';
import { completionBudget } from './chat-completions.ts';
import { EngineHttpError, internalError } from './errors.ts';
import { generate, type GenerationJob } from './generate.ts';
import { messageBody, messagesErrorBody, messagesErrorEvent, MessagesStream, type MessageIdentity } from './messages-response.ts';
import { parseMessagesRequest } from './messages-request.ts';

/**
 * POST /v1/messages, Anthropic's Messages API: the request read as the chat request it means (messages-request.ts),
 * decoded as chat is (a grammar for tools), answered as a message or its event stream; refusals in that API's shape.
 */
export async function handleMessages(body: unknown, res: ServerResponse, deps: ChatCompletionsDeps): Promise<void> {
  try {
    await answer(body, res, deps);
  } catch (error) {
    if (!(error instanceof EngineHttpError) || res.headersSent) throw error;
    const json = JSON.stringify(messagesErrorBody(error));
    res.writeHead(error.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json), ...error.headers }).end(json);
  }
}

async function answer(body: unknown, res: ServerResponse, deps: ChatCompletionsDeps): Promise<void> {
  const { engine, pool } = deps;
  const request = parseMessagesRequest(body);
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
    const identity: MessageIdentity = { id: `msg_${randomBytes(12).toString('hex')}`, model: engine.name };
    const job = { engine, sequence, prompt, request, maxTokens, grammar, signal: aborter.signal };
    if (request.stream) return await streamMessage(job, identity, res);
    let text = '';
    const result = await generate({ ...job, onText: (decoded) => (text += decoded) });
    if (result.finishReason === null) return;
    const { message, finishReason } = answerMessage(shape, engine.toolSyntax, text, result.finishReason);
    const json = JSON.stringify(messageBody(identity, message, finishReason, result));
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) }).end(json);
  } finally {
    pool.release(sequence);
  }
}

async function streamMessage(job: Omit<GenerationJob<ChatRequest>, 'onText'>, identity: MessageIdentity, res: ServerResponse): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
  const events = new MessagesStream(identity);
  res.write(events.start(job.prompt.length));
  const answer = new StreamedAnswer(job.request.tools.shape, job.engine.toolSyntax);
  const send = (text: string) => answer.push(text).forEach((delta) => res.write(events.delta(delta)));
  try {
    const result = await generate({ ...job, onText: send });
    if (result.finishReason === null) return;
    const { deltas, finishReason } = answer.end(result.finishReason);
    deltas.forEach((delta) => res.write(events.delta(delta)));
    res.end(events.end(finishReason, result));
  } catch (error) {
    if (error instanceof EngineHttpError) return void res.end(messagesErrorEvent(error));
    process.stderr.write(`sigil engine: generation failed: ${(error as Error).message}\n`);
    res.end(messagesErrorEvent(internalError()));
  }
}
