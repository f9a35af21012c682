import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Token } from 'node-llama-cpp';
import { sseEvent, usageOf, type CompletionIdentity } from './chat-response.ts';
import { parseCompletionRequest } from './completion-request.ts';
import { contextLengthExceeded, internalError } from './errors.ts';
import { generate, type FinishReason, type GenerationResult } from './generate.ts';
import type { HandlerDeps } from './handler-deps.ts';

function textChoice(text: string, finishReason: FinishReason | null) {
  return { index: 0, text, logprobs: null, finish_reason: finishReason, stop_reason: null };
}

/** A body of /v1/completions, field for field as vLLM's OpenAI server writes it. */
function completionBody(identity: CompletionIdentity, text: string, finishReason: FinishReason | null, result?: GenerationResult): object {
  return {
    id: identity.id,
    object: 'text_completion',
    created: identity.created,
    model: identity.model,
    choices: [textChoice(text, finishReason)],
    ...(result === undefined ? {} : { usage: usageOf(result) }),
  };
}

/** The prompt's tokens, special tokens read as such and led by BOS, as llama.cpp's server and vLLM tokenize a prompt. */
function promptTokens(deps: HandlerDeps, prompt: string): Token[] {
  const { model } = deps.engine;
  const tokens = model.tokenize(prompt, true);
  const bos = model.tokens.bos;
  return bos !== null && tokens[0] !== bos ? [bos, ...tokens] : tokens;
}

/** POST /v1/completions: plain text in, text (or JSON, with `response_format`) out, as JSON or SSE; no chat template. */
export async function handleCompletions(body: unknown, res: ServerResponse, deps: HandlerDeps): Promise<void> {
  const { engine, pool } = deps;
  const request = parseCompletionRequest(body);
  const prompt = promptTokens(deps, request.prompt);
  if (prompt.length === 0) throw contextLengthExceeded('The prompt is empty and this model has no BOS token to start from.');
  if (prompt.length + request.maxTokens > engine.contextSize) {
    throw contextLengthExceeded(
      `This model's maximum context length is ${engine.contextSize} tokens. However, you requested ${prompt.length + request.maxTokens} tokens ` +
        `(${prompt.length} in the prompt, ${request.maxTokens} in the completion). Please reduce the length of the prompt or completion.`,
    );
  }

  const grammar = request.format.kind === 'json' ? await engine.jsonGrammar(request.format.schema) : undefined;

  const aborter = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) aborter.abort();
  });
  const sequence = await pool.acquire(aborter.signal);
  try {
    const identity: CompletionIdentity = { id: `cmpl-${randomBytes(16).toString('hex')}`, created: Math.floor(Date.now() / 1000), model: engine.name };
    const job = { engine, sequence, prompt, request, maxTokens: request.maxTokens, grammar, signal: aborter.signal };
    if (!request.stream) {
      let text = '';
      const result = await generate({ ...job, onText: (t) => (text += t) });
      if (result.finishReason === null) return;
      const json = JSON.stringify(completionBody(identity, text, result.finishReason, result));
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) }).end(json);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
    try {
      const result = await generate({ ...job, onText: (text) => res.write(sseEvent(completionBody(identity, text, null))) });
      if (result.finishReason === null) return;
      res.write(sseEvent(completionBody(identity, '', result.finishReason)));
      if (request.includeUsage)
        res.write(
          sseEvent({ id: identity.id, object: 'text_completion', created: identity.created, model: identity.model, choices: [], usage: usageOf(result) }),
        );
      res.end(sseEvent('[DONE]'));
    } catch (error) {
      process.stderr.write(`sigil engine: generation failed: ${(error as Error).message}\n`);
      res.end(sseEvent(internalError().toJSON()));
    }
  } finally {
    pool.release(sequence);
  }
}
