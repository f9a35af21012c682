import type { ServerResponse } from 'node:http';
import type { ChatRequest } from './chat-request.ts';
import { contextLengthExceeded } from './errors.ts';
import type { GenerationJob } from './generate.ts';
import type { HandlerDeps } from './handler-deps.ts';

/** A chat request ready to decode on a sequence of its own: all generate() needs but where the text goes. */
export type ChatJob = Omit<GenerationJob<ChatRequest>, 'onText'>;

/**
 * The step chat and Messages share once a body reads as a chat request: the prompt in the model's own template, the
 * tokens the answer may take, the grammar its shape needs (JSON or tool calls), then a sequence of the pool, waited for
 * only while the client stays. Runs `answer` with the job and gives the sequence back however it ends.
 */
export async function withChatJob(request: ChatRequest, res: ServerResponse, deps: HandlerDeps, answer: (job: ChatJob) => Promise<void>): Promise<void> {
  const { engine, pool } = deps;
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
    await answer({ engine, sequence, prompt, request, maxTokens, grammar, signal: aborter.signal });
  } finally {
    pool.release(sequence);
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
