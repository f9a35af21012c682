import type { CatalogueModel } from '../catalogue/catalogue.ts';
import { httpError } from '../protocol/errors.ts';
import type { Upstream, UpstreamSet } from './upstream.ts';

/**
 * SPEC 2: the model's first upstream, or the first one in the preferred region. An upstream with no
 * region of its own serves the model's catalogue regions. A region nobody serves falls back to the
 * first upstream, unless regions are strict.
 */
export function selectUpstream(model: CatalogueModel, upstreams: UpstreamSet, region: string | undefined, strict: boolean): Upstream {
  const candidates = model.upstreams.map((name) => upstreams.get(name)!);
  if (region !== undefined) {
    const wanted = region.toLowerCase();
    const servesCatalogueRegion = model.regions.some((r) => r.toLowerCase() === wanted);
    const local = candidates.find((u) => (u.region === undefined ? servesCatalogueRegion : u.region.toLowerCase() === wanted));
    if (local) return local;
    if (strict) {
      throw httpError('region_unavailable', `The model '${model.id}' is not served in region '${region}'.`, 'region');
    }
  }
  return candidates[0]!;
}
