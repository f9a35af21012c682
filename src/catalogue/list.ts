import type { Catalogue, CatalogueModel } from './catalogue.ts';
import type { Endpoint } from './schema.ts';

/** A model as GET /v1/models (docs/api.md#endpoints) shows it. */
export interface ModelItem {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
  name: string;
  context_window: number;
  reasoning: boolean;
  /** The endpoints a client may call with this model (docs/api.md#completions-embeddings-responses). */
  endpoints: Endpoint[];
  provider?: string;
  regions?: string[];
  pricing?: CatalogueModel['pricing'];
}

export interface ListFilter {
  detail: boolean;
  region?: string;
  provider?: string;
}

export function modelItem(model: CatalogueModel, detail: boolean): ModelItem {
  const item: ModelItem = {
    id: model.id,
    object: 'model',
    created: model.created,
    owned_by: model.owned_by,
    name: model.name,
    context_window: model.context_window,
    reasoning: model.reasoning,
    endpoints: [...model.endpoints],
  };
  if (detail) {
    item.provider = model.provider;
    item.regions = [...model.regions];
    item.pricing = { ...model.pricing };
  }
  return item;
}

const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

export function listModels(catalogue: Catalogue, filter: ListFilter): { object: 'list'; data: ModelItem[] } {
  const data = catalogue.models
    .filter((m) => filter.region === undefined || m.regions.some((r) => same(r, filter.region!)))
    .filter((m) => filter.provider === undefined || same(m.provider, filter.provider))
    .map((m) => modelItem(m, filter.detail));
  return { object: 'list', data };
}
