import { afterAll, beforeAll } from 'vitest';
import { startTestEngine, type TestEngine } from './test-engine.ts';
import { startTestSigil, type CatalogueModelSpec, type TestSigil } from './sigil.ts';

export interface EngineAndSigil {
  readonly engine: TestEngine;
  readonly sigil: TestSigil;
}

/**
 * A test engine and a Sigil in front of it, started before a test file's tests and closed after them. By
 * default the engine is the one upstream `e`; `upstreams` names others around it.
 */
export function engineAndSigil(options: {
  modelNames: string[];
  models: CatalogueModelSpec[];
  config?: Record<string, unknown>;
  upstreams?: (engine: TestEngine) => Promise<Record<string, Record<string, unknown>>>;
}): EngineAndSigil {
  let engine: TestEngine | undefined;
  let sigil: TestSigil | undefined;
  beforeAll(async () => {
    engine = await startTestEngine({ modelNames: options.modelNames });
    const upstreams = options.upstreams === undefined ? { e: { url: engine.baseUrl } } : await options.upstreams(engine);
    sigil = await startTestSigil({ upstreams, models: options.models, ...(options.config === undefined ? {} : { config: options.config }) });
  });
  afterAll(async () => {
    await sigil?.close(0);
    await engine?.close();
  });
  return {
    get engine() {
      if (engine === undefined) throw new Error('the engine starts in beforeAll');
      return engine;
    },
    get sigil() {
      if (sigil === undefined) throw new Error('Sigil starts in beforeAll');
      return sigil;
    },
  };
}
