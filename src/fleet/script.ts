import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';

/** A Lua script sent by digest (EVALSHA), and in full only when the server does not know it yet. */
export class RedisScript {
  readonly #source: string;
  readonly #sha: string;

  constructor(source: string) {
    this.#source = source;
    this.#sha = createHash('sha1').update(source).digest('hex');
  }

  async run(client: Redis, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown> {
    try {
      return await client.evalsha(this.#sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return client.eval(this.#source, keys.length, ...keys, ...args);
    }
  }
}

/** The Redis server's clock in ms, so that every replica judges ages against the same clock. */
export const REDIS_NOW_MS = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;
