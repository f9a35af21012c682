/**
 * Waits for a state, not for a clock: `probe` is asked until it returns something other than `undefined` or
 * `false` (that value is returned), or until the deadline, which is generous because the shared machines run
 * loaded. A probe that throws counts as "not yet"; the last error is named if the deadline passes.
 */
export async function waitFor<T>(
  what: string,
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  { timeoutMs = 30_000, intervalMs = 20 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      const why = lastError === undefined ? '' : `; last error: ${lastError instanceof Error ? lastError.message : String(lastError)}`;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Resolves with the arguments of the first `event` the emitter fires after this call, or fails at the deadline. */
export function nextEvent<A extends unknown[]>(
  emitter: { once(event: string, listener: (...args: A) => void): unknown; off(event: string, listener: (...args: A) => void): unknown },
  event: string,
  { timeoutMs = 30_000 }: { timeoutMs?: number } = {},
): Promise<A> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      emitter.off(event, listener);
      reject(new Error(`timed out after ${timeoutMs} ms waiting for the event '${event}'`));
    }, timeoutMs);
    const listener = (...args: A): void => {
      clearTimeout(timer);
      resolve(args);
    };
    emitter.once(event, listener);
  });
}
