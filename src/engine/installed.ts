import { createRequire } from 'node:module';

/** node-llama-cpp is an optional dependency: an image that fronts another engine does not carry it. */
export class EngineNotInstalledError extends Error {
  readonly code = 'ERR_ENGINE_NOT_INSTALLED';
  constructor() {
    super(
      'the built-in engine is not installed (node-llama-cpp, an optional dependency): ' +
        'configure upstreams.NAME.url to use another engine, or install it with `npm install` (without --omit=optional)',
    );
  }
}

/** Fails with a clear message, before any module of the engine loads, when node-llama-cpp is absent. */
export function assertEngineInstalled(): void {
  try {
    createRequire(import.meta.url).resolve('node-llama-cpp');
  } catch {
    throw new EngineNotInstalledError();
  }
}
