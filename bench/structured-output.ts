/**
 * What a JSON grammar costs the built-in engine: time per decoded token of free text against the
 * same request under `response_format` json_object and under a tool call's json_schema, in
 * interleaved rounds on one engine (so the ratios are taken side by side on a shared machine), and
 * the time to answer one token with a schema (grammar compiled per request) against without.
 *
 *   npx tsx bench/structured-output.ts [--rounds 8] [--max-tokens 128]
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ensureDemoModel } from '@sigil/engine/demo-model';
import { startEngine } from '@sigil/engine/server';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '8' }, 'max-tokens': { type: 'string', default: '128' } } });
const ROUNDS = Number(values.rounds);
const MAX_TOKENS = Number(values['max-tokens']);

const model = await ensureDemoModel(join(mkdtempSync(join(tmpdir(), 'sigil-bench-structured-')), 'demo.gguf'));
const engine = await startEngine({ host: '127.0.0.1', port: 0, threads: 1, modelPath: model.path, parallel: 1, contextSize: 2048, maxQueued: 4 });

const messages = [{ role: 'user', content: 'Describe the weather in Paris.' }];
const schema = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 40 },
    days: { type: 'array', items: { type: 'object', properties: { summary: { type: 'string' }, rain: { type: 'boolean' } } } },
  },
};
const variants = {
  text: {},
  json_object: { response_format: { type: 'json_object' } },
  tool_schema: {
    tools: [{ type: 'function', function: { name: 'forecast', parameters: schema } }],
    tool_choice: { type: 'function', function: { name: 'forecast' } },
  },
} as const;
type Variant = keyof typeof variants;

async function run(variant: Variant, maxTokens: number, seed: number): Promise<{ ms: number; tokens: number }> {
  const t0 = performance.now();
  const res = await fetch(`${engine.url}/v1/chat/completions`, {
    method: 'POST',
    body: JSON.stringify({ messages, max_tokens: maxTokens, seed, temperature: 1, ...variants[variant] }),
  });
  const body = (await res.json()) as { usage?: { completion_tokens: number }; error?: unknown };
  if (!res.ok) throw new Error(`${variant}: ${res.status} ${JSON.stringify(body.error)}`);
  return { ms: performance.now() - t0, tokens: body.usage!.completion_tokens };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const perToken: Record<Variant, number[]> = { text: [], json_object: [], tool_schema: [] };
const tokens: Record<Variant, number[]> = { text: [], json_object: [], tool_schema: [] };
const firstToken: Record<'text' | 'tool_schema', number[]> = { text: [], tool_schema: [] };

await run('text', 8, 1); // warm-up
for (let round = 0; round < ROUNDS; round++) {
  const order: Variant[] = round % 2 === 0 ? ['text', 'json_object', 'tool_schema'] : ['tool_schema', 'json_object', 'text'];
  for (const variant of order) {
    const { ms, tokens: n } = await run(variant, MAX_TOKENS, 100 + round);
    perToken[variant].push(ms / n);
    tokens[variant].push(n);
  }
  for (const variant of round % 2 === 0 ? (['text', 'tool_schema'] as const) : (['tool_schema', 'text'] as const)) {
    firstToken[variant].push((await run(variant, 1, 100 + round)).ms);
  }
}
await engine.close();

const base = median(perToken.text);
console.log(`demo model, ${ROUNDS} interleaved rounds, max_tokens ${MAX_TOKENS}, one sequence, one thread`);
console.log('| answer | tokens (median) | ms per token (median) | ratio to free text |');
console.log('|---|---|---|---|');
for (const variant of Object.keys(variants) as Variant[]) {
  console.log(`| ${variant} | ${median(tokens[variant])} | ${median(perToken[variant]).toFixed(2)} | ${(median(perToken[variant]) / base).toFixed(2)} |`);
}
console.log(
  `one-token answer: ${median(firstToken.text).toFixed(1)} ms free, ${median(firstToken.tool_schema).toFixed(1)} ms with the tool schema (grammar built per request), ratio ${(median(firstToken.tool_schema) / median(firstToken.text)).toFixed(2)}`,
);
