import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { tool as langchainTool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
import { generateObject, generateText, jsonSchema, NoObjectGeneratedError, tool } from 'ai';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { addKey } from '../../src/auth/keys-file.ts';
import { parseConfig } from '../../src/config/load.ts';
import { makeModel } from '../../packages/engine/src/model/make-model.ts';
import { startSigil, type RunningSigil } from '../../src/http/start.ts';
import { createLogger } from '../../src/logger/logger.ts';

/**
 * The two most used JS frameworks with their default settings against Sigil in front of the
 * built-in engine and the random-weight demo model. The model may answer text or call a tool; either
 * way the client must get a well-formed result, never an error.
 */
let dir: string;
let sigil: RunningSigil;
let key: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sigil-frameworks-'));
  await makeModel({ out: join(dir, 'demo.gguf') });
  const config = { listen: { host: '127.0.0.1', port: 0 }, auth: { keys_file: 'keys' }, engine: { model: 'demo.gguf', parallel: 2, context_size: 512 } };
  writeFileSync(join(dir, 'sigil.yaml'), stringify(config));
  key = addKey(join(dir, 'keys')).key;
  const quiet = new Writable({ write: (_c, _e, done) => done() });
  sigil = await startSigil(parseConfig(stringify(config), join(dir, 'sigil.yaml')), { logger: createLogger('info', quiet) });
}, 120_000);

afterAll(async () => {
  await sigil?.close(0);
  rmSync(dir, { recursive: true, force: true });
});

const SEEDS = [1, 2, 3, 4, 5, 6];
const CITIES = ['Paris', 'Lyon'];

describe('LangChain ChatOpenAI', () => {
  it('bindTools().invoke answers with tool calls of a declared tool, or with text', async () => {
    const getWeather = langchainTool(() => 'sunny', {
      name: 'get_weather',
      description: 'The weather now in a city',
      schema: z.object({ city: z.enum(CITIES), days: z.number().int().min(1).max(7) }),
    });
    const kinds = new Set<string>();
    for (const seed of SEEDS) {
      const model = new ChatOpenAI({ model: 'demo', apiKey: key, configuration: { baseURL: `${sigil.url}/v1` }, maxRetries: 0, modelKwargs: { seed } });
      const answer = await model.bindTools([getWeather]).invoke('What is the weather in Paris?');
      expect(answer.invalid_tool_calls ?? []).toEqual([]);
      if ((answer.tool_calls ?? []).length > 0) {
        kinds.add('tool');
        for (const call of answer.tool_calls!) {
          expect(call.name).toBe('get_weather');
          expect(CITIES).toContain(call.args.city);
          expect(Number.isInteger(call.args.days)).toBe(true);
          expect(call.args.days).toBeGreaterThanOrEqual(1);
          expect(call.args.days).toBeLessThanOrEqual(7);
          expect(call.id).toMatch(/^chatcmpl-tool-[0-9a-f]{32}$/);
        }
      } else {
        kinds.add('text');
        expect(typeof answer.content).toBe('string');
        expect(answer.response_metadata.finish_reason).toMatch(/^(stop|length)$/);
      }
    }
    expect(kinds.size).toBeGreaterThan(0);
  }, 120_000);
});

describe('Vercel AI SDK', () => {
  const provider = () => createOpenAICompatible({ name: 'sigil', baseURL: `${sigil.url}/v1`, apiKey: key });

  it('generateText({ tools }) answers tool calls with parsed input, or text', async () => {
    for (const seed of SEEDS) {
      const result = await generateText({
        model: provider()('demo'),
        prompt: 'What is the weather in Paris?',
        seed,
        tools: {
          get_weather: tool({ description: 'The weather now in a city', inputSchema: z.object({ city: z.enum(CITIES), metric: z.boolean() }) }),
        },
      });
      if (result.toolCalls.length > 0) {
        expect(result.finishReason).toBe('tool-calls');
        for (const call of result.toolCalls) {
          expect(call.toolName).toBe('get_weather');
          expect(call.invalid ?? false).toBe(false);
          expect(CITIES).toContain((call.input as { city: string }).city);
          expect(typeof (call.input as { metric: unknown }).metric).toBe('boolean');
        }
      } else {
        expect(['stop', 'length']).toContain(result.finishReason);
        expect(typeof result.text).toBe('string');
      }
    }
  }, 120_000);

  it('generateObject with structured outputs: a zod schema with .int() and .email() is enforced', async () => {
    const model = createOpenAICompatible({ name: 'sigil', baseURL: `${sigil.url}/v1`, apiKey: key, supportsStructuredOutputs: true })('demo');
    const schema = z.object({ age: z.number().int().min(0).max(130), email: z.string().email(), name: z.string().max(20) });
    for (const seed of SEEDS.slice(0, 3)) {
      const { object, finishReason } = await generateObject({ model, schema, seed, prompt: 'Invent a person.' });
      expect(finishReason).toBe('stop');
      expect(Number.isInteger(object.age)).toBe(true);
      expect(object.email).toMatch(/^[^@\s]+@[^@\s]+\.[^@\s]+$/);
      expect(schema.safeParse(object).success).toBe(true);
    }
  }, 120_000);

  it('generateObject with default settings (json_object, no schema sent): a JSON object, or an answer cut at max_tokens said to be cut', async () => {
    const model = provider()('demo');
    const result = await generateObject({ model, schema: jsonSchema({ type: 'object' }), seed: 7, prompt: 'Invent a person.' }).catch((e: unknown) => e);
    if (NoObjectGeneratedError.isInstance(result)) {
      // The random model rarely closes a free string; the engine then says the answer was cut, never "stop".
      expect(result.finishReason).toBe('length');
      expect(result.text!.startsWith('{')).toBe(true);
      return;
    }
    const { object, finishReason } = result as { object: unknown; finishReason: string };
    expect(finishReason).toBe('stop');
    expect(typeof object).toBe('object');
    expect(Array.isArray(object)).toBe(false);
  }, 120_000);
});

describe('with a model that calls a tool (scripted to answer in its template’s call syntax)', () => {
  let caller: RunningSigil;
  let callerKey: string;

  beforeAll(async () => {
    await makeModel({ out: join(dir, 'caller.gguf'), scripted: '||call: get_weather({"city":"Paris","days":3})' });
    const config = {
      listen: { host: '127.0.0.1', port: 0 },
      auth: { keys_file: 'caller-keys' },
      engine: { model: 'caller.gguf', parallel: 1, context_size: 512 },
    };
    writeFileSync(join(dir, 'caller.yaml'), stringify(config));
    callerKey = addKey(join(dir, 'caller-keys')).key;
    const quiet = new Writable({ write: (_c, _e, done) => done() });
    caller = await startSigil(parseConfig(stringify(config), join(dir, 'caller.yaml')), { logger: createLogger('info', quiet) });
  }, 120_000);

  afterAll(async () => {
    await caller?.close(0);
  });

  it('LangChain bindTools().invoke gets the call as a parsed tool call', async () => {
    const getWeather = langchainTool(() => 'sunny', {
      name: 'get_weather',
      description: 'The weather now in a city',
      schema: z.object({ city: z.enum(CITIES), days: z.number().int().min(1).max(7) }),
    });
    const model = new ChatOpenAI({ model: 'caller', apiKey: callerKey, temperature: 0, configuration: { baseURL: `${caller.url}/v1` }, maxRetries: 0 });
    const answer = await model.bindTools([getWeather]).invoke('What is the weather in Paris?');
    expect(answer.tool_calls).toEqual([expect.objectContaining({ name: 'get_weather', args: { city: 'Paris', days: 3 } })]);
    expect(answer.response_metadata.finish_reason).toBe('tool_calls');
  });

  it('the AI SDK generateText({ tools }) gets it as a tool call with parsed input', async () => {
    const model = createOpenAICompatible({ name: 'sigil', baseURL: `${caller.url}/v1`, apiKey: callerKey })('caller');
    const result = await generateText({
      model,
      temperature: 0,
      prompt: 'What is the weather in Paris?',
      tools: { get_weather: tool({ description: 'The weather now in a city', inputSchema: z.object({ city: z.enum(CITIES), days: z.number().int() }) }) },
    });
    expect(result.finishReason).toBe('tool-calls');
    expect(result.toolCalls.map((c) => ({ name: c.toolName, input: c.input }))).toEqual([{ name: 'get_weather', input: { city: 'Paris', days: 3 } }]);
  });
});
