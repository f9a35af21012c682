import type { Catalogue } from '../catalogue/catalogue.ts';
import type { Upstream, UpstreamSet } from '../proxy/upstream.ts';

/** How an engine Sigil waits for is named, at start, in /readyz and when it comes up: its name, URL and why it is not reachable. */
export function waitingFor(name: string, url: string, cause: string): string {
  return `waiting for engine \`${name}\` at ${url}: ${cause}`;
}

const answering = (u: Upstream | undefined) => u !== undefined && u.health.up && u.health.cause === undefined;

/** The engines not answering that some catalogue model needs (a model with one engine answering is served). */
export function enginesAwaited(catalogue: Catalogue, upstreams: UpstreamSet): Upstream[] {
  const needed = new Set<string>();
  for (const model of catalogue.models) {
    if (!model.upstreams.some((name) => answering(upstreams.get(name)))) for (const name of model.upstreams) needed.add(name);
  }
  return [...upstreams.values()].filter((u) => needed.has(u.name) && !answering(u));
}

/** Resolves when every catalogue model has an engine up again: on the health check that finds the last one answering. */
export function whenEnginesUp(catalogue: Catalogue, upstreams: UpstreamSet): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      if (enginesAwaited(catalogue, upstreams).length > 0) return;
      for (const u of upstreams.values()) u.health.listeners = (u.health.listeners ?? []).filter((l) => l !== check);
      resolve();
    };
    for (const u of upstreams.values()) (u.health.listeners ??= []).push(check);
    check();
  });
}
