import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.ts';
import { servingProcesses, signsOnThreadPool } from '../../src/config/workers.ts';

/** src/config/workers.ts: receipts go to libuv's thread pool only when a core is left for it. */
const config = (yaml: string) => parseConfig(`auth: { keys_file: api-keys }\ncatalogue: models.yaml\n${yaml}`, '/tmp/sigil.yaml');
const ENGINE = 'upstreams:\n  vllm:\n    url: http://127.0.0.1:8000/v1\n';

describe('where receipts are signed', () => {
  it('counts one serving process per core by default, and one with the built-in engine', () => {
    expect(servingProcesses(config(`${ENGINE}workers: 3\n`))).toBe(3);
    expect(servingProcesses(config(''))).toBe(1);
  });

  it('signs on the thread pool only when the machine has more cores than serving processes', () => {
    expect(signsOnThreadPool(config(`${ENGINE}workers: 1\n`), 2)).toBe(true);
    expect(signsOnThreadPool(config(`${ENGINE}workers: 2\n`), 2)).toBe(false);
    expect(signsOnThreadPool(config(`${ENGINE}workers: 1\n`), 1)).toBe(false);
    // By default every core has a worker: none is left for the pool.
    expect(signsOnThreadPool(config(ENGINE), 8)).toBe(false);
    // The built-in engine serves from one process; its threads and the pool share the others.
    expect(signsOnThreadPool(config(''), 4)).toBe(true);
  });
});
