import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import OpenAI from 'openai';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addKey } from '../../src/auth/keys-file.ts';
import { parseConfig } from '../../src/config/load.ts';
import { ensureDemoModel } from '../../packages/engine/src/demo-model.ts';
import { startSigil, type RunningSigil } from '../../src/http/start.ts';
import { createLogger } from '../../src/logger/logger.ts';

/** What the README says the demo engine does with tools, asked as the README's clients ask it, against the demo model itself. */
const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8').replace(/\s+/g, ' ');

let sigil: RunningSigil;
let key: string;

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sigil-readme-demo-'));
  await ensureDemoModel(join(dir, 'demo-tiny-random.gguf'));
  const config = {
    listen: { host: '127.0.0.1', port: 0 },
    auth: { keys_file: 'keys' },
    engine: { model: 'demo-tiny-random.gguf', parallel: 1, context_size: 2048 },
  };
  writeFileSync(join(dir, 'sigil.yaml'), stringify(config));
  key = addKey(join(dir, 'keys')).key;
  const quiet = new Writable({ write: (_c, _e, done) => done() });
  sigil = await startSigil(parseConfig(stringify(config), join(dir, 'sigil.yaml')), { logger: createLogger('info', quiet) });
}, 180_000);

afterAll(async () => {
  await sigil?.close(0);
});

const client = () => new OpenAI({ baseURL: `${sigil.url}/v1`, apiKey: key, maxRetries: 0 });
const tools = [
  {
    type: 'function' as const,
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'] },
    },
  },
];
const ask = {
  model: 'demo-tiny-random',
  messages: [{ role: 'user' as const, content: 'What is the weather in Paris?' }],
  temperature: 0,
  seed: 1,
  max_tokens: 48,
  tools,
};

describe('the README on the demo engine', () => {
  it('tool_choice "auto" (what bindTools() and generateText({ tools }) send): text, as the README says', async () => {
    expect(README).toContain('the random model almost always answers **text**; send `"required"` to see a call from the demo');
    const answer = await client().chat.completions.create({ ...ask, tool_choice: 'auto' });
    expect(answer.choices[0]!.message.tool_calls ?? []).toEqual([]);
    expect(typeof answer.choices[0]!.message.content).toBe('string');
  }, 120_000);

  it('tool_choice "required": a valid call of the declared tool', async () => {
    expect(README).toContain('`tool_choice: "required"` or a named function: a valid call of a declared tool');
    const answer = await client().chat.completions.create({ ...ask, tool_choice: 'required', parallel_tool_calls: false });
    const calls = answer.choices[0]!.message.tool_calls!;
    expect(answer.choices[0]!.finish_reason).toBe('tool_calls');
    expect(calls.map((c) => (c.type === 'function' ? c.function.name : c.type))).toEqual(['get_weather']);
    const args = JSON.parse(calls[0]!.type === 'function' ? calls[0]!.function.arguments : '') as { city: unknown };
    expect(typeof args.city).toBe('string');
  }, 120_000);

  it('no /v1/responses on the demo: a clear 400', async () => {
    expect(README).toContain('not `/v1/responses`: Sigil answers it with a clear 400 on the demo');
    const error = await client()
      .responses.create({ model: 'demo-tiny-random', input: 'Hi' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
  }, 60_000);
});

describe('json_object without a schema (what the AI SDK’s default generateObject sends) on the demo model', () => {
  it.each([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])(
    'closes a valid JSON object well within the token budget (seed %i)',
    async (seed) => {
      const answer = await client().chat.completions.create({
        model: 'demo-tiny-random',
        messages: [{ role: 'user', content: 'Describe a cat as JSON.' }],
        response_format: { type: 'json_object' },
        seed,
        max_tokens: 256,
      });
      expect(answer.choices[0]!.finish_reason).toBe('stop');
      const value = JSON.parse(answer.choices[0]!.message.content!) as unknown;
      expect(typeof value === 'object' && value !== null && !Array.isArray(value)).toBe(true);
      expect(answer.usage!.completion_tokens).toBeLessThan(256);
    },
    120_000,
  );
});
