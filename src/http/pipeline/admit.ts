import type { AdmittedExchange, ReadExchange } from './exchange.ts';

/**
 * Admit: the caller's slots under `limits.*` (429 with Retry-After when over a limit), and the rate-limit
 * headers the response carries. Undefined when the client left while the counters answered: the slots
 * are given back at once and the exchange ends there.
 */
export async function admit(x: ReadExchange): Promise<AdmittedExchange | undefined> {
  const admission = await x.ctx.limits.admit(x.caller);
  for (const [name, value] of Object.entries(admission.headers)) x.res.setHeader(name, value);
  if (x.closed) {
    admission.release(0);
    return undefined;
  }
  return Object.assign(x, { release: admission.release });
}
