import { parseArgs } from 'node:util';
import { disposeLlama } from '@sigil/engine/runtime';
import { measureEngine } from '@sigil/engine/bench';
import { makeModel } from '@sigil/engine/make-model';
import { startEngine } from '@sigil/engine/server';

import { ENGINE_USAGE as USAGE } from './engine-usage.ts';
import { UsageError } from './cli-errors.ts';

/** `sigil engine`: the built-in llama.cpp engine, or `make-model` to write a tiny GGUF for it. */
export async function run(argv: string[]): Promise<number> {
  try {
    if (argv[0] === 'make-model') return await runMakeModel(argv.slice(1));
    if (argv[0] === 'bench') return await runBench(argv.slice(1));
    return await runServe(argv);
  } catch (error) {
    process.stderr.write(`sigil engine: ${(error as Error).message}\n`);
    return error instanceof UsageError ? 2 : 1;
  } finally {
    await disposeLlama();
  }
}

async function runMakeModel(argv: string[]): Promise<number> {
  const { values } = parse(argv, {
    out: { type: 'string' },
    vocab: { type: 'string' },
    scripted: { type: 'string' },
    seed: { type: 'string' },
  });
  if (values.out === undefined) throw new UsageError(`--out is required\n${USAGE}`);
  const made = await makeModel({
    out: values.out,
    ...(values.vocab !== undefined ? { vocabPath: values.vocab } : {}),
    ...(values.scripted !== undefined ? { scripted: values.scripted } : {}),
    ...(values.seed !== undefined ? { seed: integer(values.seed, '--seed', 0) } : {}),
  });
  process.stdout.write(`${JSON.stringify(made)}\n`);
  return 0;
}

async function runBench(argv: string[]): Promise<number> {
  const { values } = parse(argv, {
    model: { type: 'string' },
    threads: { type: 'string', default: '1' },
    parallel: { type: 'string', default: '2' },
    requests: { type: 'string', default: '5' },
    'max-tokens': { type: 'string', default: '256' },
  });
  if (values.model === undefined) throw new UsageError(`--model is required\n${USAGE}`);
  const measured = await measureEngine({
    modelPath: values.model,
    threads: integer(values.threads, '--threads', 1),
    parallel: integer(values.parallel, '--parallel', 1),
    requests: integer(values.requests, '--requests', 1),
    maxTokens: integer(values['max-tokens'], '--max-tokens', 1),
  });
  process.stdout.write(`${JSON.stringify(measured)}\n`);
  return 0;
}

async function runServe(argv: string[]): Promise<number> {
  const { values } = parse(argv, {
    model: { type: 'string' },
    host: { type: 'string', default: '127.0.0.1' },
    port: { type: 'string', default: '8000' },
    parallel: { type: 'string', default: '2' },
    threads: { type: 'string', default: '1' },
    context: { type: 'string', default: '2048' },
    queue: { type: 'string', default: '16' },
  });
  if (values.model === undefined) throw new UsageError(`--model is required\n${USAGE}`);
  const engine = await startEngine({
    modelPath: values.model,
    host: values.host,
    port: integer(values.port, '--port', 0),
    parallel: integer(values.parallel, '--parallel', 1),
    threads: integer(values.threads, '--threads', 1),
    contextSize: integer(values.context, '--context', 16),
    maxQueued: integer(values.queue, '--queue', 0),
  });
  process.stdout.write(`${JSON.stringify({ event: 'listening', url: engine.url })}\n`);
  await new Promise<void>((resolve) => {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => resolve());
    // Started by startEngineProcess: the IPC channel closes when the parent dies, however it dies.
    if (process.send) process.once('disconnect', () => resolve());
  });
  await engine.close();
  if (process.connected) process.disconnect();
  return 0;
}

function parse<T extends Record<string, { type: 'string'; default?: string }>>(argv: string[], options: T) {
  try {
    return parseArgs({ args: argv, options, strict: true, allowPositionals: false });
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\n${USAGE}`);
  }
}

function integer(text: string, flag: string, min: number): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < min) throw new UsageError(`${flag} must be an integer of at least ${min}`);
  return value;
}
