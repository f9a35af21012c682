import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { describeIssues } from '../config/load.ts';
import { catalogueSchema, DEFAULT_ENDPOINTS, type CatalogueEntry, type Endpoint } from './schema.ts';
import { SigilError } from '../protocol/sigil-error.ts';

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
  /** Lowercase hex SHA-256 of the file's bytes this catalogue was parsed from (the manifest's `catalogue_sha256`); null when built in memory. */
  sha256: string | null;
}

export class CatalogueError extends SigilError<'ERR_CATALOGUE_INVALID'> {
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_CATALOGUE_INVALID', message, options);
  }
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
  return { models: [...byId.values()], byId, sha256: null };
}

/** Reads the catalogue file once: the bytes parsed are the bytes hashed for the manifest, whatever the file holds later. */
export function loadCatalogue(path: string, upstreamNames: readonly string[]): Catalogue {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    throw new CatalogueError(`cannot read catalogue ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = parseYaml(bytes.toString('utf8'));
  } catch (err) {
    throw new CatalogueError(`${path}: not valid YAML: ${(err as Error).message}`);
  }
  const catalogue = { ...buildCatalogue(raw, path, upstreamNames), sha256: createHash('sha256').update(bytes).digest('hex') };
  // A weights path is relative to the catalogue file, as config paths are to the config file.
  for (const model of catalogue.models) if (model.weights !== undefined && !isAbsolute(model.weights)) model.weights = resolve(dirname(path), model.weights);
  return catalogue;
}
