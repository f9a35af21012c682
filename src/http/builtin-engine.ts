import { existsSync, statSync } from 'node:fs';
import { basename, extname, resolve } from 'node:path';
import type { Endpoint } from '../catalogue/schema.ts';
import type { LoadedConfig } from '../config/load.ts';
import type { Logger } from '../logger/logger.ts';
import { SIGIL_PROGRAM } from './sigil-program.ts';

/** Where the zero-config demo model lives, relative to the working directory. */
export const DEMO_MODEL_PATH = '.sigil/models/demo-tiny-random.gguf';
/** What the built-in engine serves (packages/engine/README.md): no /v1/responses, and embeddings from the same model. */
const BUILTIN_ENGINE_ENDPOINTS: Endpoint[] = ['chat', 'completions', 'embeddings', 'messages'];
export const BUILTIN_UPSTREAM = 'builtin';

/** The GGUF the built-in engine loads for this configuration: `engine.model`, else the demo model (relative to the working directory). */
export function builtinModelPath(config: LoadedConfig): string {
  return config.engine.model ?? resolve(DEMO_MODEL_PATH);
}

/** The model id the built-in engine serves a file as (and its catalogue lists): the file name without its extension. */
export function builtinModelId(modelPath: string): string {
  return basename(modelPath, extname(modelPath));
}

export interface BuiltinEngine {
  /** The configuration with the engine as its one upstream. */
  config: LoadedConfig;
  /** The catalogue to serve when the configuration names none. */
  catalogue: { models: Array<Record<string, unknown>> } | undefined;
  stop(): Promise<void>;
}

/**
 * Zero-config start (docs/configuration.md#sigilyaml): with no upstream configured, run the built-in llama.cpp engine as a
 * child process and proxy to it. Without `engine.model`, the demo model is made (or reused); its
 * catalogue entry says plainly that its weights are random, and its hash is computed from the file.
 */
export async function startBuiltinEngine(config: LoadedConfig, logger: Logger): Promise<BuiltinEngine> {
  const { assertEngineInstalled } = await import('@sigil/engine/installed');
  assertEngineInstalled();
  const { startEngineProcess } = await import('@sigil/engine/process');
  const { ensureDemoModel } = await import('@sigil/engine/demo-model');
  const { sha256File } = await import('@sigil/engine/hash');

  const demo = config.engine.model === undefined;
  const modelPath = builtinModelPath(config);
  // Progress a person waits through on a first start: making the demo model, then loading the engine.
  if (demo && !existsSync(modelPath)) logger.info({ path: modelPath }, 'making the demo model (5.6 MB of random weights, once)');
  const modelHash = demo ? (await ensureDemoModel(modelPath)).sha256 : `sha256:${await sha256File(modelPath)}`;
  logger.info({ model: basename(modelPath), threads: config.engine.threads, parallel: config.engine.parallel }, 'starting the built-in engine');
  const started = Date.now();
  const engine = await startEngineProcess({
    program: SIGIL_PROGRAM,
    modelPath,
    threads: config.engine.threads,
    parallel: config.engine.parallel,
    contextSize: config.engine.context_size,
    startTimeoutMs: config.engine.start_timeout_ms,
  });
  logger.info({ model: basename(modelPath), model_hash: modelHash, url: engine.url, ms: Date.now() - started }, 'built-in engine started');

  const catalogue =
    config.catalogue !== undefined
      ? undefined
      : {
          models: [
            {
              id: engine.modelName,
              name: demo ? 'Demo model (random weights: its output is noise)' : engine.modelName,
              provider: 'local',
              created: Math.floor(statSync(modelPath).mtimeMs / 1000),
              context_window: config.engine.context_size,
              reasoning: false,
              regions: ['local'],
              pricing: { input_per_mtok: 0, output_per_mtok: 0, currency: 'USD' },
              model_hash: modelHash,
              // The file the engine loads: Sigil hashes it again at start, so the manifest counts it as measured.
              weights: modelPath,
              endpoints: BUILTIN_ENGINE_ENDPOINTS,
              description: demo
                ? 'A tiny llama-architecture GGUF with random weights, made by Sigil for end-to-end demos. Not a language model.'
                : `Served from ${basename(modelPath)} by the built-in llama.cpp engine.`,
            },
          ],
        };
  return {
    config: {
      ...config,
      upstreams: {
        [BUILTIN_UPSTREAM]: {
          url: `${engine.url}/v1`,
          timeout_ms: 600_000,
          connect_timeout_ms: 10_000,
          idle_timeout_ms: 120_000,
          connections: 64,
          forward_headers: [],
          allow_outside_vm: false,
          cache_salt: false,
        },
      },
    },
    catalogue,
    stop: engine.stop,
  };
}
