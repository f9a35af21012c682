import type { LlamaContextSequence } from 'node-llama-cpp';
import type { EngineModel } from './engine-model.ts';
import type { SequencePool } from './sequence-pool.ts';

/** What every generating handler decodes with: the loaded model and the pool of its context's sequences. */
export interface HandlerDeps {
  engine: EngineModel;
  pool: SequencePool<LlamaContextSequence>;
}
