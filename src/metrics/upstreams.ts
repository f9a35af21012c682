import type { UpstreamSet } from '../proxy/upstream.ts';
import type { SigilMetrics } from './registry.ts';

/** Makes the metrics the observer of every upstream. */
export function observeUpstreams(metrics: SigilMetrics, upstreams: UpstreamSet): void {
  const observer = {
    requestDone(upstream: string, seconds: number, outcome: string) {
      metrics.upstreamDuration.observe({ upstream }, seconds);
      metrics.upstreamRequests.inc({ upstream, outcome });
    },
    failedOver(from: string, to: string) {
      metrics.upstreamFailovers.inc({ from_upstream: from, to_upstream: to });
    },
    healthChanged(upstream: string, up: boolean) {
      metrics.upstreamUp.set({ upstream }, up ? 1 : 0);
    },
  };
  for (const upstream of upstreams.values()) {
    upstream.observer = observer;
    metrics.upstreamUp.set({ upstream: upstream.name }, upstream.health.up ? 1 : 0);
  }
}
