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

/**
 * Fails with a clear message, before any module of the engine loads, when node-llama-cpp is absent. Resolved as the
 * engine's own `import` resolves it, so from the artifact the launcher's hook answers (engine/node_modules beside dist/).
 */
export function assertEngineInstalled(): void {
  try {
    import.meta.resolve('node-llama-cpp');
  } catch {
    throw new EngineNotInstalledError();
  }
}
