import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { answerMessage, StreamedAnswer } from './chat-answer.ts';
import { withChatJob, type ChatJob } from './chat-job.ts';
import { EngineHttpError, internalError } from './errors.ts';
import { generate } from './generate.ts';
import type { HandlerDeps } from './handler-deps.ts';
import { messageBody, messagesErrorBody, messagesErrorEvent, MessagesStream, type MessageIdentity } from './messages-response.ts';
import { parseMessagesRequest } from './messages-request.ts';

/**
 * POST /v1/messages, Anthropic's Messages API: the request read as the chat request it means (messages-request.ts),
 * decoded as chat is (a grammar for tools), answered as a message or its event stream; refusals in that API's shape.
 */
export async function handleMessages(body: unknown, res: ServerResponse, deps: HandlerDeps): Promise<void> {
  try {
    await answer(body, res, deps);
  } catch (error) {
    if (!(error instanceof EngineHttpError) || res.headersSent) throw error;
    const json = JSON.stringify(messagesErrorBody(error));
    res.writeHead(error.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json), ...error.headers }).end(json);
  }
}

async function answer(body: unknown, res: ServerResponse, deps: HandlerDeps): Promise<void> {
  const request = parseMessagesRequest(body);
  await withChatJob(request, res, deps, async (job) => {
    const identity: MessageIdentity = { id: `msg_${randomBytes(12).toString('hex')}`, model: job.engine.name };
    if (request.stream) return await streamMessage(job, identity, res);
    let text = '';
    const result = await generate({ ...job, onText: (decoded) => (text += decoded) });
    if (result.finishReason === null) return;
    const { message, finishReason } = answerMessage(request.tools.shape, job.engine.toolSyntax, text, result.finishReason);
    const json = JSON.stringify(messageBody(identity, message, finishReason, result));
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) }).end(json);
  });
}

async function streamMessage(job: ChatJob, identity: MessageIdentity, res: ServerResponse): Promise<void> {
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
