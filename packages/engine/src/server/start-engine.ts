import type { AddressInfo } from 'node:net';
import { createEngineServer } from './http-server.ts';
import { loadEngineModel, type EngineModelOptions } from './engine-model.ts';

export interface StartEngineOptions extends EngineModelOptions {
  host: string;
  port: number;
  maxQueued: number;
}

export interface RunningEngine {
  url: string;
  modelName: string;
  contextSize: number;
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 4 * 1024 * 1024;

/** Loads the model and serves it on host:port (port 0 picks a free one). */
export async function startEngine(options: StartEngineOptions): Promise<RunningEngine> {
  const engine = await loadEngineModel(options);
  const server = createEngineServer(engine, { maxQueued: options.maxQueued, maxBodyBytes: MAX_BODY_BYTES });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, resolve);
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  return {
    url: `http://${host}:${port}`,
    modelName: engine.name,
    contextSize: engine.contextSize,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await engine.dispose();
    },
  };
}
