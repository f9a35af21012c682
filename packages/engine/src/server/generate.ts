import { randomInt } from 'node:crypto';
import { LlamaGrammarEvaluationState, type LlamaContextSequence, type LlamaGrammar, type Token } from 'node-llama-cpp';
import type { EngineModel } from './engine-model.ts';
import { StopTextFilter } from './stop-text.ts';
import { TokenTextDecoder } from './token-text.ts';

export type FinishReason = 'stop' | 'length';

/** What sampling reads of a request, chat or plain completion alike. */
export interface SamplingRequest {
  temperature: number;
  topP: number;
  seed: number | undefined;
  stop: string[];
}

export interface GenerationResult {
  /** Null when the client went away before the answer ended. */
  finishReason: FinishReason | null;
  promptTokens: number;
  /** Every token sampled, the end-of-turn token included (as vLLM and llama.cpp's server count). */
  completionTokens: number;
}

export interface GenerationJob<R extends SamplingRequest = SamplingRequest> {
  engine: EngineModel;
  sequence: LlamaContextSequence;
  prompt: Token[];
  request: R;
  maxTokens: number;
  /** Sampling keeps to this grammar when given: every token keeps the text a prefix of what it accepts. */
  grammar?: LlamaGrammar | undefined;
  signal: AbortSignal;
  onText(text: string): void;
}

/** Decodes one answer on one sequence, reusing whatever prefix of the prompt the sequence already holds. */
export async function generate(job: GenerationJob): Promise<GenerationResult> {
  const { engine, sequence, prompt, request, signal } = job;
  await sequence.adaptStateToTokens(prompt.slice(0, -1), false);
  const decoder = new TokenTextDecoder(engine.model, prompt);
  const stops = new StopTextFilter([...request.stop, ...engine.stopTexts]);
  const result: GenerationResult = { finishReason: null, promptTokens: prompt.length, completionTokens: 0 };
  if (signal.aborted) return result;

  const tokens = sequence.evaluate(prompt.slice(sequence.nextTokenIndex), {
    temperature: request.temperature,
    topP: request.topP,
    // node-llama-cpp's default seed is the clock, which would repeat answers to requests in the same second.
    seed: request.seed ?? randomInt(2 ** 31),
    yieldEogToken: true,
    ...(job.grammar === undefined ? {} : { grammarEvaluationState: new LlamaGrammarEvaluationState({ model: engine.model, grammar: job.grammar }) }),
  });
  for await (const token of tokens) {
    result.completionTokens++;
    if (engine.model.isEogToken(token) || engine.stopTokens.has(token)) {
      result.finishReason = 'stop';
      break;
    }
    const text = stops.push(decoder.push(token));
    if (text) job.onText(text);
    if (stops.stopped) {
      result.finishReason = 'stop';
      break;
    }
    if (signal.aborted) return result;
    if (result.completionTokens >= job.maxTokens) {
      result.finishReason = 'length';
      break;
    }
  }
  result.finishReason ??= 'length';
  if (!stops.stopped) {
    const tail = stops.push(decoder.flush());
    const rest = stops.stopped ? tail : tail + stops.flush();
    if (rest) job.onText(rest);
  }
  return result;
}
