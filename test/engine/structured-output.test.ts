import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeModel } from '../../packages/engine/src/model/make-model.ts';
import { startEngine, type RunningEngine } from '../../packages/engine/src/server/start-engine.ts';

/**
 * response_format, tools and tool_choice on the built-in engine: JSON grammars keep every sampled
 * token inside the schema, so even a model that only knows one sentence answers valid JSON and
 * valid tool calls. What a client sees is checked with the official openai client.
 */
const SENTENCE = 'Receipts prove which enclave served you.';
const messages = [{ role: 'user' as const, content: 'What is the weather in Paris?' }];
const weather = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'The weather now in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Lyon'] }, metric: { type: 'boolean' } }, required: ['city'] },
  },
};
const time = { type: 'function' as const, function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { const: 'CET' } } } } };
const named = { type: 'function' as const, function: { name: 'get_weather' } };

let dir: string;
let engine: RunningEngine;
let client: OpenAI;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sigil-structured-'));
  await makeModel({ out: join(dir, 'scripted.gguf'), scripted: SENTENCE });
  engine = await startEngine({ host: '127.0.0.1', port: 0, threads: 1, modelPath: join(dir, 'scripted.gguf'), parallel: 2, contextSize: 1024, maxQueued: 4 });
  client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});

afterAll(async () => {
  await engine?.close();
  await rm(dir, { recursive: true, force: true });
});

const post = (body: unknown) =>
  fetch(`${engine.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages, temperature: 0, ...(body as object) }),
  });

/** The arguments of a weather call, parsed: the schema says a known city and a boolean. */
function expectWeatherArguments(text: string): void {
  const args = JSON.parse(text) as Record<string, unknown>;
  expect(Object.keys(args).sort()).toEqual(['city', 'metric']);
  expect(['Paris', 'Lyon']).toContain(args.city);
  expect(typeof args.metric).toBe('boolean');
}

describe('response_format', () => {
  it('json_schema: the content is JSON of the schema, though the model only knows a sentence', async () => {
    const schema = {
      type: 'object',
      properties: { answer: { enum: ['yes', 'no'] }, note: { type: 'string', maxLength: 12 } },
      required: ['answer', 'note'],
      additionalProperties: false,
    };
    const completion = await client.chat.completions.create({
      model: 'scripted',
      messages,
      temperature: 0,
      response_format: { type: 'json_schema', json_schema: { name: 'reply', schema, strict: true } },
    });
    expect(completion.choices[0]!.finish_reason).toBe('stop');
    const reply = JSON.parse(completion.choices[0]!.message.content!) as { answer: string; note: string };
    expect(Object.keys(reply).sort()).toEqual(['answer', 'note']);
    expect(['yes', 'no']).toContain(reply.answer);
    expect(reply.note.length).toBeLessThanOrEqual(12);
    // Without the grammar the same request answers the sentence.
    const free = await client.chat.completions.create({ model: 'scripted', messages, temperature: 0 });
    expect(free.choices[0]!.message.content).toBe(SENTENCE);
  });

  it('json_schema with $defs, anyOf and arrays', async () => {
    const schema = {
      type: 'object',
      properties: {
        colours: { type: 'array', items: { $ref: '#/$defs/colour' }, minItems: 1, maxItems: 2 },
        size: { anyOf: [{ type: 'null' }, { enum: ['S', 'M'] }] },
      },
      $defs: { colour: { enum: ['red', 'blue'] } },
    };
    const completion = await client.chat.completions.create({
      model: 'scripted',
      messages,
      temperature: 0,
      response_format: { type: 'json_schema', json_schema: { name: 'shirt', schema } },
    });
    const shirt = JSON.parse(completion.choices[0]!.message.content!) as { colours: string[]; size: string | null };
    expect(shirt.colours.length).toBeGreaterThanOrEqual(1);
    expect(shirt.colours.length).toBeLessThanOrEqual(2);
    expect(shirt.colours.every((c) => c === 'red' || c === 'blue')).toBe(true);
    expect([null, 'S', 'M']).toContain(shirt.size);
  });

  it.each([
    [
      'a multipleOf the grammar cannot hold',
      { type: 'object', properties: { n: { type: 'integer', multipleOf: 5 } } },
      'response_format.json_schema.schema.properties.n.multipleOf',
    ],
    ['bounds no whole number meets', { type: 'number', minimum: 0.2, maximum: 0.8 }, 'response_format.json_schema.schema'],
    ['a pattern', { type: 'object', properties: { s: { type: 'string', pattern: '^a' } } }, 'response_format.json_schema.schema.properties.s.pattern'],
    ['a string format it does not know', { type: 'string', format: 'hostname' }, 'response_format.json_schema.schema.format'],
    [
      'a pattern beside email other than the usual one',
      { type: 'string', format: 'email', pattern: '^a@b\\.c$' },
      'response_format.json_schema.schema.pattern',
    ],
    ['a property that allows anything', { type: 'object', properties: { x: {} } }, 'response_format.json_schema.schema.properties.x'],
    ['a reference to nothing', { type: 'object', properties: { x: { $ref: '#/$defs/missing' } } }, 'response_format.json_schema.schema.properties.x.$ref'],
    ['an allOf of two schemas', { allOf: [{ type: 'string' }, { type: 'string' }] }, 'response_format.json_schema.schema.allOf'],
    [
      'a required property it does not describe',
      { type: 'object', properties: { a: { type: 'string' } }, required: ['b'] },
      'response_format.json_schema.schema.required',
    ],
    ['a bound beside an enum', { type: 'string', enum: ['ab', 'cd'], maxLength: 1 }, 'response_format.json_schema.schema.maxLength'],
    ['a bound beside a type list', { type: ['string', 'null'], maxLength: 3 }, 'response_format.json_schema.schema.maxLength'],
  ])('refuses a schema with %s, a 400 naming where it is', async (_name, schema, param) => {
    const res = await post({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { param: string; code: string; message: string } };
    expect(error).toMatchObject({ param, code: 'invalid_request' });
    expect(error.message).toMatch(/schema|needs|allows|defin/);
  });

  it('enforces minimum, maximum and their exclusive forms, and format email: every sampled answer keeps them', async () => {
    const schema = {
      type: 'object',
      properties: {
        days: { type: 'integer', minimum: 1, maximum: 7 },
        delta: { type: 'integer', exclusiveMinimum: -3, exclusiveMaximum: 3 },
        ratio: { type: 'number', minimum: 0.5, maximum: 4 },
        contact: { type: 'string', format: 'email' },
      },
    };
    for (const seed of [1, 2, 3, 4, 5]) {
      const completion = await client.chat.completions.create({
        model: 'scripted',
        messages,
        seed,
        response_format: { type: 'json_schema', json_schema: { name: 'bounds', schema } },
      });
      expect(completion.choices[0]!.finish_reason).toBe('stop');
      const answer = JSON.parse(completion.choices[0]!.message.content!) as { days: number; delta: number; ratio: number; contact: string };
      expect(Number.isInteger(answer.days) && answer.days >= 1 && answer.days <= 7).toBe(true);
      expect(Number.isInteger(answer.delta) && answer.delta > -3 && answer.delta < 3).toBe(true);
      expect(answer.ratio >= 0.5 && answer.ratio <= 4).toBe(true);
      expect(answer.contact).toMatch(/^[a-z0-9.]+@[a-z0-9.]+\.[a-z]{2,6}$/);
    }
  });

  it('on /v1/completions too: the text is JSON of the schema', async () => {
    const schema = { type: 'object', properties: { ok: { type: 'boolean' } } };
    const completion = await client.completions.create({
      model: 'scripted',
      prompt: '<|user|>Is it raining?<|end|><|assistant|>',
      temperature: 0,
      max_tokens: 32,
      // Not in the openai types for completions; vLLM accepts it there.
      ...({ response_format: { type: 'json_schema', json_schema: { name: 'rain', schema } } } as object),
    });
    expect(completion.choices[0]!.finish_reason).toBe('stop');
    expect(typeof (JSON.parse(completion.choices[0]!.text) as { ok: unknown }).ok).toBe('boolean');
  });

  it('refuses an unknown response_format type', async () => {
    const res = await post({ response_format: { type: 'yaml' } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { param: string } }).error.param).toBe('response_format.type');
  });
});

describe('tools and tool_choice', () => {
  it('a named tool choice answers one call of that tool, arguments valid for its parameters, vLLM-shaped', async () => {
    const completion = await client.chat.completions.create({ model: 'scripted', messages, temperature: 0, tools: [weather, time], tool_choice: named });
    const choice = completion.choices[0]!;
    expect(choice.finish_reason).toBe('stop');
    expect(choice.message.content).toBe('');
    expect(choice.message.tool_calls).toHaveLength(1);
    const call = choice.message.tool_calls![0]!;
    expect(call.id).toMatch(/^chatcmpl-tool-[0-9a-f]{32}$/);
    expect(call.type).toBe('function');
    if (call.type !== 'function') return;
    expect(call.function.name).toBe('get_weather');
    expectWeatherArguments(call.function.arguments);
  });

  it('shows the tools to the model: the prompt with tools is longer', async () => {
    const bare = await client.chat.completions.create({ model: 'scripted', messages, temperature: 0, max_tokens: 1 });
    const withTools = await client.chat.completions.create({
      model: 'scripted',
      messages,
      temperature: 0,
      max_tokens: 1,
      tools: [weather],
      tool_choice: named,
    });
    expect(withTools.usage!.prompt_tokens).toBeGreaterThan(bare.usage!.prompt_tokens + 20);
  });

  it('"required" without parallel calls answers exactly one call of a declared tool, finish_reason tool_calls', async () => {
    const completion = await client.chat.completions.create({
      model: 'scripted',
      messages,
      temperature: 0,
      tools: [weather, time],
      tool_choice: 'required',
      parallel_tool_calls: false,
    });
    const choice = completion.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.tool_calls).toHaveLength(1);
    const call = choice.message.tool_calls![0]!;
    if (call.type !== 'function') throw new Error('not a function call');
    expect(['get_weather', 'get_time']).toContain(call.function.name);
    if (call.function.name === 'get_weather') expectWeatherArguments(call.function.arguments);
    else expect(JSON.parse(call.function.arguments)).toEqual({ zone: 'CET' });
  });

  it('streams a named call: the first delta names the call, the rest add to its arguments, which add up to valid JSON', async () => {
    const stream = await client.chat.completions.create({ model: 'scripted', messages, temperature: 0, tools: [weather], tool_choice: named, stream: true });
    const deltas: OpenAI.ChatCompletionChunk.Choice.Delta.ToolCall[] = [];
    const finishes: Array<string | null> = [];
    for await (const chunk of stream) {
      for (const choice of chunk.choices) {
        deltas.push(...(choice.delta.tool_calls ?? []));
        finishes.push(choice.finish_reason);
      }
    }
    expect(deltas.length).toBeGreaterThan(3);
    expect(deltas[0]).toMatchObject({ index: 0, id: expect.stringMatching(/^chatcmpl-tool-/), type: 'function', function: { name: 'get_weather' } });
    expect(deltas.slice(1).every((d) => d.index === 0 && d.id === undefined && d.function?.name === undefined)).toBe(true);
    expectWeatherArguments(deltas.map((d) => d.function?.arguments ?? '').join(''));
    expect(finishes.at(-1)).toBe('stop');
  });

  it('streams "required" calls whole once their list is complete, then finish_reason tool_calls', async () => {
    const stream = await client.chat.completions.create({
      model: 'scripted',
      messages,
      temperature: 0,
      tools: [weather],
      tool_choice: 'required',
      parallel_tool_calls: false,
      stream: true,
    });
    const deltas: OpenAI.ChatCompletionChunk.Choice.Delta.ToolCall[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      for (const choice of chunk.choices) {
        deltas.push(...(choice.delta.tool_calls ?? []));
        finish = choice.finish_reason ?? finish;
      }
    }
    expect(deltas).toHaveLength(1);
    expect(deltas[0]).toMatchObject({ index: 0, type: 'function', function: { name: 'get_weather' } });
    expectWeatherArguments(deltas[0]!.function!.arguments!);
    expect(finish).toBe('tool_calls');
  });

  it('takes the tool results back and answers in words with tool_choice "none"', async () => {
    const first = await client.chat.completions.create({ model: 'scripted', messages, temperature: 0, tools: [weather], tool_choice: named });
    const call = first.choices[0]!.message.tool_calls![0]!;
    const followUp = [...messages, first.choices[0]!.message, { role: 'tool' as const, tool_call_id: call.id, content: '{"temperature_c": 21}' }];
    const answer = await client.chat.completions.create({ model: 'scripted', messages: followUp, temperature: 0, tools: [weather], tool_choice: 'none' });
    expect(answer.choices[0]!.finish_reason).toBe('stop');
    expect(typeof answer.choices[0]!.message.content).toBe('string');
    expect(answer.choices[0]!.message.tool_calls).toBeUndefined();
    // The call and its result are part of the prompt.
    const withoutResult = await client.chat.completions.create({ model: 'scripted', messages, temperature: 0, max_tokens: 1 });
    expect(answer.usage!.prompt_tokens).toBeGreaterThan(withoutResult.usage!.prompt_tokens + 10);
    // Clients that send the assistant's calls without a content field, or with null, are read the same.
    for (const content of [undefined, null]) {
      const res = await post({
        messages: [...messages, { role: 'assistant', content, tool_calls: [call] }, followUp[2]],
        tools: [weather],
        tool_choice: 'none',
        max_tokens: 1,
      });
      expect(res.status).toBe(200);
    }
  });

  it.each([
    ['a named tool that is not declared', { tools: [weather], tool_choice: { type: 'function', function: { name: 'launch' } } }, 'tool_choice'],
    ['"required" with no tools', { tool_choice: 'required' }, 'tool_choice'],
    ['a tool that is not a function', { tools: [{ type: 'code_interpreter' }], tool_choice: 'required' }, 'tools[0]'],
    ['a tool name with spaces', { tools: [{ type: 'function', function: { name: 'get weather' } }], tool_choice: 'required' }, 'tools[0].function.name'],
    ['a tool declared twice', { tools: [weather, weather], tool_choice: 'required' }, 'tools[1].function.name'],
    [
      'parameters the grammar cannot enforce',
      {
        tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { n: { type: 'number', multipleOf: 3 } } } } }],
        tool_choice: 'required',
      },
      'tools[0].function.parameters.properties.n.multipleOf',
    ],
    [
      'a tool call nobody answered',
      {
        messages: [
          ...messages,
          { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }] },
          { role: 'user', content: 'and?' },
        ],
      },
      'messages[1].tool_calls[0]',
    ],
    ['a tool message answering no call', { messages: [...messages, { role: 'tool', tool_call_id: 'c9', content: '1' }] }, 'messages[1]'],
  ])('refuses %s with a 400 naming %s', async (_name, body, param) => {
    const res = await post(body);
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { param: string; type: string } };
    expect(error).toMatchObject({ param, type: 'invalid_request_error' });
  });

  it('"auto" (the default with tools) answers text, or calls in the template\'s syntax, each valid for its tool', async () => {
    const kinds = new Set<string>();
    for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
      const completion = await client.chat.completions.create({ model: 'scripted', messages, seed, tools: [weather, time], max_tokens: 200 });
      const choice = completion.choices[0]!;
      if (choice.message.tool_calls !== undefined) {
        kinds.add('calls');
        expect(choice.finish_reason).toBe('tool_calls');
        expect(choice.message.content).toBe('');
        for (const call of choice.message.tool_calls) {
          if (call.type !== 'function') throw new Error('not a function call');
          if (call.function.name === 'get_weather') expectWeatherArguments(call.function.arguments);
          else expect(JSON.parse(call.function.arguments)).toEqual({ zone: 'CET' });
        }
      } else {
        kinds.add('text');
        expect(choice.message.content!.startsWith('||call: ')).toBe(false);
      }
    }
    expect(kinds.size).toBeGreaterThan(0);
  });

  it.each([
    ['a named tool', named],
    ['"required"', 'required' as const],
  ])('a call cut at max_tokens by %s answers finish_reason length with the arguments as decoded, never tool_calls', async (_name, choice) => {
    const completion = await client.chat.completions.create({ model: 'scripted', messages, tools: [weather], tool_choice: choice, max_tokens: 4 });
    expect(completion.choices[0]!.finish_reason).toBe('length');
    const calls = completion.choices[0]!.message.tool_calls ?? [];
    for (const call of calls) {
      if (call.type !== 'function') throw new Error('not a function call');
      expect(() => JSON.parse(call.function.arguments)).toThrow();
    }
  });
});

describe('tool_choice "auto" with a model that calls a tool', () => {
  const CALL = '||call: get_time({"zone":"CET"})';
  let caller: RunningEngine;
  let callerClient: OpenAI;

  beforeAll(async () => {
    await makeModel({ out: join(dir, 'caller.gguf'), scripted: CALL });
    caller = await startEngine({ host: '127.0.0.1', port: 0, threads: 1, modelPath: join(dir, 'caller.gguf'), parallel: 1, contextSize: 1024, maxQueued: 4 });
    callerClient = new OpenAI({ baseURL: `${caller.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  });

  afterAll(async () => {
    await caller?.close();
  });

  it("a call written in the template's syntax becomes a tool call, finish_reason tool_calls", async () => {
    const completion = await callerClient.chat.completions.create({ model: 'caller', messages, temperature: 0, tools: [weather, time] });
    const choice = completion.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBe('');
    expect(choice.message.tool_calls).toHaveLength(1);
    expect(choice.message.tool_calls![0]).toMatchObject({ type: 'function', function: { name: 'get_time', arguments: '{"zone":"CET"}' } });
  });

  it('streams the call whole once the answer ends, and no text', async () => {
    const stream = await callerClient.chat.completions.create({ model: 'caller', messages, temperature: 0, tools: [weather, time], stream: true });
    const deltas: OpenAI.ChatCompletionChunk.Choice.Delta[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      for (const choice of chunk.choices) {
        deltas.push(choice.delta);
        finish = choice.finish_reason ?? finish;
      }
    }
    expect(deltas.map((d) => d.content ?? '').join('')).toBe('');
    const calls = deltas.flatMap((d) => d.tool_calls ?? []);
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ index: 0, type: 'function', function: { name: 'get_time', arguments: '{"zone":"CET"}' } });
    expect(finish).toBe('tool_calls');
  });

  it('without tools the same model answers the call syntax as plain text', async () => {
    const completion = await callerClient.chat.completions.create({ model: 'caller', messages, temperature: 0 });
    expect(completion.choices[0]!.message.content).toBe(CALL);
  });
});
