import type { Catalogue } from '../catalogue/catalogue.ts';
import type { LoadedConfig } from '../config/load.ts';
import type { Logger } from '../logger/logger.ts';
import { buildPolicy, type PolicyDocument } from '../policy/document.ts';
import { jcsSha256 } from '../protocol/jcs.ts';
import { markUnreachableAtStart, requestModelList, type UpstreamSet } from '../proxy/upstream.ts';
import { engineUnreachableCause } from '../proxy/engine-unreachable.ts';

/** What start and every reload build the same way from a catalogue file: the models served and the policy that names them. */
export interface ServedCatalogue {
  catalogue: Catalogue;
  policy: PolicyDocument;
  policyHash: string;
}

/**
 * The one place the served catalogue is made: the catalogue as loaded, minus the models
 * no engine lists when `routing.hide_unlisted_models` says so, and the policy over what is left.
 */
export async function buildServedCatalogue(loaded: Catalogue, config: LoadedConfig, upstreams: UpstreamSet, logger: Logger): Promise<ServedCatalogue> {
  const catalogue = await checkEngineListings(loaded, upstreams, config.routing.hide_unlisted_models, logger);
  const policy = buildPolicy(catalogue, config);
  return { catalogue, policy, policyHash: jcsSha256(policy) };
}

/** Logs catalogue models that no engine lists; hides them when the config says so. An engine that does not answer hides nothing. */
async function checkEngineListings(catalogue: Catalogue, upstreams: UpstreamSet, hide: boolean, logger: Logger): Promise<Catalogue> {
  const listed = new Map<string, Set<string> | undefined>();
  await Promise.all(
    [...upstreams.values()].map(async (u) => {
      try {
        const response = await requestModelList(u);
        const body = (await response.body.json()) as { data?: Array<{ id?: unknown }> };
        listed.set(u.name, new Set((body.data ?? []).map((m) => String(m.id))));
      } catch (err) {
        const cause = engineUnreachableCause(err);
        markUnreachableAtStart(u, cause);
        logger.warn({ upstream: u.name, url: u.url, cause }, `engine \`${u.name}\` not reachable at ${u.url}: ${cause}; its model list is not checked`);
        listed.set(u.name, undefined);
      }
    }),
  );
  const kept = catalogue.models.filter((m) => {
    const known = m.upstreams.map((name) => listed.get(name));
    if (known.some((set) => set === undefined || set.has(m.upstream_model))) return true;
    logger.warn(
      { model: m.id, upstream_model: m.upstream_model },
      hide ? 'engine does not list this model: hidden' : 'engine does not list this model: served anyway',
    );
    return !hide;
  });
  return { models: kept, byId: new Map(kept.map((m) => [m.id, m])), sha256: catalogue.sha256 };
}
