import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { describeIssues } from '../config/load.ts';
import { catalogueSchema, DEFAULT_ENDPOINTS, type CatalogueEntry, type Endpoint } from './schema.ts';

export interface CatalogueModel extends CatalogueEntry {
  owned_by: string;
  /** The name the engine knows the model by. */
  upstream_model: string;
  /** Upstream names, in preference order. */
  upstreams: string[];
  /** The endpoints it serves, the default filled in. */
  endpoints: Endpoint[];
}

export interface Catalogue {
  models: readonly CatalogueModel[];
  byId: ReadonlyMap<string, CatalogueModel>;
}

export class CatalogueError extends Error {
  readonly code = 'ERR_CATALOGUE_INVALID';
}

/** Builds the catalogue and checks it against the configured upstream names. */
export function buildCatalogue(raw: unknown, source: string, upstreamNames: readonly string[]): Catalogue {
  const parsed = catalogueSchema.safeParse(raw);
  if (!parsed.success) throw new CatalogueError(describeIssues(parsed.error.issues, source, catalogueSchema));
  const byId = new Map<string, CatalogueModel>();
  parsed.data.models.forEach((entry, i) => {
    if (byId.has(entry.id)) throw new CatalogueError(`${source}: models.${i}.id: duplicate model id '${entry.id}'`);
    const upstreams = entry.upstream === undefined ? [...upstreamNames] : [entry.upstream].flat();
    for (const name of upstreams) {
      if (!upstreamNames.includes(name)) {
        throw new CatalogueError(`${source}: models.${i}.upstream: no upstream named '${name}' in the configuration`);
      }
    }
    byId.set(entry.id, {
      ...entry,
      owned_by: entry.owned_by ?? entry.provider,
      upstream_model: entry.upstream_model ?? entry.id,
      upstreams,
      endpoints: [...(entry.endpoints ?? DEFAULT_ENDPOINTS)],
    });
  });
  return { models: [...byId.values()], byId };
}

export function loadCatalogue(path: string, upstreamNames: readonly string[]): Catalogue {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new CatalogueError(`cannot read catalogue ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new CatalogueError(`${path}: not valid YAML: ${(err as Error).message}`);
  }
  const catalogue = buildCatalogue(raw, path, upstreamNames);
  // A weights path is relative to the catalogue file, as config paths are to the config file.
  for (const model of catalogue.models) if (model.weights !== undefined && !isAbsolute(model.weights)) model.weights = resolve(dirname(path), model.weights);
  return catalogue;
}
