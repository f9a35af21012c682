import type { SigilConfig } from './schema.ts';

const LOOPBACK = /^(?:127(?:\.\d{1,3}){3}|::1|localhost)$/i;

/** What `limits.shutdown_drain_ms` is when the config does not set it and a load balancer may be probing /readyz. */
export const BALANCED_DRAIN_MS = 5000;

/**
 * How long /readyz answers 503 before the listener closes on a stop: the configured value, else 5 s where a load
 * balancer may be in front (a network address, `listen.trusted_proxies`, or fleet mode), else none, so a
 * development start on loopback stops at once on Ctrl-C (docs/decisions.md, "The first hour, round three").
 */
export function shutdownDrainMs(config: Pick<SigilConfig, 'listen' | 'limits' | 'fleet'>): number {
  if (config.limits.shutdown_drain_ms !== undefined) return config.limits.shutdown_drain_ms;
  const balanced = !LOOPBACK.test(config.listen.host) || config.listen.trusted_proxies.length > 0 || config.fleet !== undefined;
  return balanced ? BALANCED_DRAIN_MS : 0;
}
