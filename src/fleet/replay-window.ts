import { MemoryReplayWindow, type ReplayVerdict, type ReplayWindow } from '../limits/replay-window.ts';
import type { FleetConnection } from './connection.ts';
import type { FleetKeys } from './redis-keys.ts';

/**
 * The replay window shared by the fleet: `SET <prefix><id> 1 NX PX <window>`, so a sealed request
 * replayed to another replica is refused too, and Redis forgets it on time. Every id is also kept in
 * this replica's memory, which alone answers while Redis is unreachable.
 */
export class RedisReplayWindow implements ReplayWindow {
  readonly #connection: FleetConnection;
  readonly #prefix: string;
  readonly #windowMs: number;
  readonly #local: MemoryReplayWindow;

  constructor(connection: FleetConnection, keys: FleetKeys, options: { windowS: number; maxEntries: number }) {
    this.#connection = connection;
    this.#prefix = keys.replayPrefix;
    this.#windowMs = options.windowS * 1000;
    this.#local = new MemoryReplayWindow(options);
  }

  async claim(id: string): Promise<ReplayVerdict> {
    const local = this.#local.claimNow(id);
    if (local !== 'fresh' || !this.#connection.up) return local;
    try {
      const set = await this.#connection.client.set(this.#prefix + id, '1', 'PX', this.#windowMs, 'NX');
      return set === 'OK' ? 'fresh' : 'replayed';
    } catch (err) {
      this.#connection.noteFailure(err);
      return 'fresh';
    }
  }
}
