import { availableParallelism } from 'node:os';
import type { LoadedConfig } from './load.ts';

/**
 * How many processes serve: `workers`, or by default one per core this process may run on, fleet mode
 * included; one with the built-in engine (its decoding threads want those cores) (docs/decisions.md, "workers").
 */
export function servingProcesses(config: LoadedConfig, cores: number = availableParallelism()): number {
  if (config.workers !== undefined) return config.workers;
  if (Object.keys(config.upstreams).length === 0) return 1;
  return cores;
}

/**
 * Whether receipts are signed on libuv's thread pool: only when this process may run on more cores than there
 * are serving processes, so a pool thread has a core of its own. Otherwise the hand-off costs more than it
 * saves: the pool thread competes for the event loop's core, and each signature then takes about ten futex
 * calls and two context switches on top of its 40 µs (docs/decisions.md, "Receipts are signed on the event
 * loop unless a core is free").
 */
export function signsOnThreadPool(config: LoadedConfig, cores: number = availableParallelism()): boolean {
  return cores > servingProcesses(config, cores);
}
