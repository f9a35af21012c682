import type { CatalogueModel } from '../catalogue/catalogue.ts';
import { httpError } from '../protocol/errors.ts';
import type { Upstream, UpstreamSet } from './upstream.ts';

/**
 * The engines to try for a model, in order. The preferred region's engines first (an upstream
 * with no region of its own serves the model's catalogue regions), then the others, unless regions are
 * strict; a region nobody serves falls back to the others, unless strict. Within that order, engines
 * that are up come before those marked unreachable, which are kept last rather than dropped: when all
 * are down, trying is better than refusing.
 */
export function selectUpstreams(model: CatalogueModel, upstreams: UpstreamSet, region: string | undefined, strict: boolean): Upstream[] {
  const candidates = model.upstreams.map((name) => upstreams.get(name)!);
  let ordered = candidates;
  if (region !== undefined) {
    const wanted = region.toLowerCase();
    const servesCatalogueRegion = model.regions.some((r) => r.toLowerCase() === wanted);
    const local = candidates.filter((u) => (u.region === undefined ? servesCatalogueRegion : u.region.toLowerCase() === wanted));
    if (local.length === 0 && strict) {
      throw httpError('region_unavailable', `The model '${model.id}' is not served in region '${region}'.`, 'region');
    }
    ordered = strict ? local : [...local, ...candidates.filter((u) => !local.includes(u))];
  }
  return [...ordered.filter((u) => u.health.up), ...ordered.filter((u) => !u.health.up)];
}

/** The first engine selectUpstreams would try. */
export function selectUpstream(model: CatalogueModel, upstreams: UpstreamSet, region: string | undefined, strict: boolean): Upstream {
  return selectUpstreams(model, upstreams, region, strict)[0]!;
}
