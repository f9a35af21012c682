import { UsageError } from './cli-errors.ts';
import { chooseSubcommand, parseCommandLine, usageExit, type CommandSpec } from './command-line.ts';

const makeModelCommand = {
  name: 'engine make-model',
  summary: 'writes a tiny llama GGUF with random weights, for tests and demos',
  options: {
    out: { type: 'string', value: 'FILE.gguf', description: 'where to write it (required)' },
    vocab: { type: 'string', value: 'FILE.gguf', description: 'take the tokenizer from this GGUF (default: the bundled Phi-3 tokenizer)' },
    scripted: { type: 'string', value: 'TEXT', description: 'greedy decoding answers exactly this text (default: random weights)' },
    seed: { type: 'string', value: 'N', description: 'seed of the random weights (default 42: the same model every time)' },
  },
} as const satisfies CommandSpec;

const benchCommand = {
  name: 'engine bench',
  summary: 'measures the engine on a model and prints the figures as JSON',
  options: {
    model: { type: 'string', value: 'FILE.gguf', description: 'the model to measure (required)' },
    threads: { type: 'string', value: 'N', description: 'CPU threads', default: '1' },
    parallel: { type: 'string', value: 'N', description: 'requests at the same time', default: '2' },
    requests: { type: 'string', value: 'N', description: 'requests to time', default: '5' },
    'max-tokens': { type: 'string', value: 'N', description: 'tokens generated per request', default: '256' },
  },
} as const satisfies CommandSpec;

/** `sigil engine`: serves a GGUF model; its subcommands make a model or measure the engine. */
export const command = {
  name: 'engine',
  summary: 'serves a GGUF model with the OpenAI API (the built-in llama.cpp engine)',
  options: {
    model: { type: 'string', value: 'FILE.gguf', description: 'the model to serve (required)' },
    host: { type: 'string', value: 'ADDRESS', description: 'address to listen on', default: '127.0.0.1' },
    port: { type: 'string', value: 'N', description: 'port to listen on, 0 for any free port', default: '8000' },
    parallel: { type: 'string', value: 'N', description: 'requests decoded at the same time', default: '2' },
    threads: { type: 'string', value: 'N', description: 'CPU threads for llama.cpp', default: '1' },
    context: { type: 'string', value: 'N', description: 'context size in tokens, per parallel slot', default: '2048' },
    queue: { type: 'string', value: 'N', description: 'requests waiting for a slot; more are refused', default: '16' },
  },
  subcommands: [makeModelCommand, benchCommand],
} as const satisfies CommandSpec;

/** `sigil engine`: the built-in llama.cpp engine, or `make-model` to write a tiny GGUF for it. */
export async function run(argv: string[]): Promise<number> {
  const chosen = argv[0] === undefined || argv[0].startsWith('-') ? undefined : chooseSubcommand(command, argv);
  if (typeof chosen === 'number') return chosen;
  const spec: CommandSpec = chosen?.sub ?? command;
  try {
    if (chosen?.sub === makeModelCommand) return await runMakeModel(chosen.argv);
    if (chosen?.sub === benchCommand) return await runBench(chosen.argv);
    return await runServe(argv);
  } catch (error) {
    const usage = usageExit(spec, error);
    if (usage !== undefined) return usage;
    process.stderr.write(`sigil engine: ${(error as Error).message}\n`);
    return 1;
  } finally {
    if (loaded) await (await import('@sigil/engine/runtime')).disposeLlama();
  }
}

let loaded = false;

/** The engine's modules, loaded only once a command line is accepted: --help works without node-llama-cpp installed. */
async function engineModules() {
  (await import('@sigil/engine/installed')).assertEngineInstalled();
  loaded = true;
  const [{ measureEngine }, { makeModel }, { startEngine }] = await Promise.all([
    import('@sigil/engine/bench'),
    import('@sigil/engine/make-model'),
    import('@sigil/engine/server'),
  ]);
  return { measureEngine, makeModel, startEngine };
}

async function runMakeModel(argv: string[]): Promise<number> {
  const line = parseCommandLine(makeModelCommand, argv);
  if (typeof line === 'number') return line;
  const { values } = line;
  if (values.out === undefined) throw new UsageError('--out is required');
  const seed = values.seed !== undefined ? integer(values.seed, '--seed', 0) : undefined;
  const made = await (
    await engineModules()
  ).makeModel({
    out: values.out,
    ...(values.vocab !== undefined ? { vocabPath: values.vocab } : {}),
    ...(values.scripted !== undefined ? { scripted: values.scripted } : {}),
    ...(seed !== undefined ? { seed } : {}),
  });
  process.stdout.write(`${JSON.stringify(made)}\n`);
  return 0;
}

async function runBench(argv: string[]): Promise<number> {
  const line = parseCommandLine(benchCommand, argv);
  if (typeof line === 'number') return line;
  const { values } = line;
  if (values.model === undefined) throw new UsageError('--model is required');
  const options = {
    modelPath: values.model,
    threads: integer(values.threads, '--threads', 1),
    parallel: integer(values.parallel, '--parallel', 1),
    requests: integer(values.requests, '--requests', 1),
    maxTokens: integer(values['max-tokens'], '--max-tokens', 1),
  };
  const measured = await (await engineModules()).measureEngine(options);
  process.stdout.write(`${JSON.stringify(measured)}\n`);
  return 0;
}

async function runServe(argv: string[]): Promise<number> {
  const line = parseCommandLine(command, argv);
  if (typeof line === 'number') return line;
  const { values } = line;
  if (values.model === undefined) throw new UsageError('--model is required');
  const options = {
    modelPath: values.model,
    host: values.host,
    port: integer(values.port, '--port', 0),
    parallel: integer(values.parallel, '--parallel', 1),
    threads: integer(values.threads, '--threads', 1),
    contextSize: integer(values.context, '--context', 16),
    maxQueued: integer(values.queue, '--queue', 0),
  };
  const engine = await (await engineModules()).startEngine(options);
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

function integer(text: string, flag: string, min: number): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < min) throw new UsageError(`${flag} must be an integer of at least ${min}`);
  return value;
}
