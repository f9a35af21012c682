import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';
import { didYouMean, knownKeysAt } from '../protocol/known-keys.ts';
import { configSchema, type SigilConfig } from './schema.ts';
import { SigilError } from '../protocol/sigil-error.ts';

export const DEFAULT_CONFIG_PATH = 'config/sigil.yaml';

/** A configuration that cannot be used; the message names the offending key. */
export class ConfigError extends SigilError<'ERR_CONFIG_INVALID'> {
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_CONFIG_INVALID', message, options);
  }
}

export interface LoadedConfig extends SigilConfig {
  /** Absolute path of the file the configuration came from. */
  source: string;
  /** Lowercase hex SHA-256 of the bytes this configuration was parsed from: what the manifest names as `config_sha256`. */
  sourceSha256: string;
}

/**
 * What to write for each required setting (of sigil.yaml and of the catalogue) that is missing: an example value,
 * keyed by the path with list positions and upstream names as `*`.
 */
const REQUIRED_HINTS: Record<string, string> = {
  auth: ', e.g. `auth: {keys_file: api-keys}` (the file `sigil keys add` writes; see config/sigil.example.yaml and docs/configuration.md)',
  'auth.keys_file': ', e.g. `keys_file: api-keys` (the file `sigil keys add` writes; see docs/configuration.md)',
  'upstreams.*.url': ", e.g. `url: http://127.0.0.1:8000/v1` (the engine's OpenAI base URL)",
  'fleet.redis_url': ', e.g. `redis_url: redis://10.0.0.5:6379` (deploy/README.md)',
  'transparency_log.dir': ', e.g. `dir: /var/lib/sigil/log` (a folder Sigil may write; docs/log.md)',
  'tls.acme.directory_url': ', e.g. `directory_url: https://acme-v02.api.letsencrypt.org/directory` (docs/tls.md)',
  models: ', e.g. `models: [{id: llama-3.1-8b, ...}]` (config/models.yaml is an example; docs/configuration.md#the-model-catalogue)',
  'models.*.id': ', e.g. `id: llama-3.1-8b` (the name clients send as `model`)',
  'models.*.name': ', e.g. `name: Llama 3.1 8B Instruct` (shown to people)',
  'models.*.provider': ', e.g. `provider: meta` (who made the model)',
  'models.*.created': ', e.g. `created: 1721692800` (Unix seconds, as OpenAI lists it; 0 when unknown)',
  'models.*.context_window': ', e.g. `context_window: 8192` (tokens, as the engine serves it)',
  'models.*.model_hash': ', e.g. `model_hash: "sha256:<64 hex digits>"` (what `sigil hash-model PATH` prints for the weights)',
  'models.*.pricing.input_per_mtok': ', e.g. `input_per_mtok: 0` (per million tokens; leave out `pricing` for a free model)',
  'models.*.pricing.output_per_mtok': ', e.g. `output_per_mtok: 0` (per million tokens; leave out `pricing` for a free model)',
};

/** The hint's key: list positions and upstream names as `*`. */
function hintKey(path: readonly PropertyKey[]): string {
  return path.map((segment, i) => (typeof segment === 'number' || (i === 1 && path[0] === 'upstreams') ? '*' : String(segment))).join('.');
}

/** Formats schema issues as `key.path: problem`, one per line. */
export function describeIssues(issues: readonly z.core.$ZodIssue[], label: string, schema?: z.core.$ZodType): string {
  return issues
    .map((issue) => {
      const at = issue.path.map(String).join('.');
      if (issue.code === 'unrecognized_keys') {
        const known = schema === undefined ? [] : knownKeysAt(schema, issue.path);
        return issue.keys.map((key) => `${label}: unknown key '${at ? `${at}.${key}` : key}'${didYouMean(key, known)}`).join('\n');
      }
      if (issue.code === 'invalid_type' && / received undefined$/.test(issue.message)) {
        return `${label}: ${at || '(top level)'}: missing: this setting is required${REQUIRED_HINTS[hintKey(issue.path)] ?? ''}`;
      }
      return `${label}: ${at || '(top level)'}: ${issue.message}`;
    })
    .join('\n');
}

/** Parses a configuration's text; `sha256` is that of the bytes it was decoded from (default: of the text's UTF-8). */
export function parseConfig(text: string, source: string, sha256 = createHash('sha256').update(text, 'utf8').digest('hex')): LoadedConfig {
  let raw: unknown;
  try {
    raw = parseYaml(text) ?? {};
  } catch (err) {
    throw new ConfigError(`${source}: not valid YAML: ${(err as Error).message}`);
  }
  const result = configSchema.safeParse(raw);
  if (!result.success) throw new ConfigError(describeIssues(result.error.issues, source, configSchema));
  const config = result.data;
  const base = dirname(source);
  const at = (p: string) => (isAbsolute(p) ? p : resolve(base, p));
  return {
    ...config,
    source,
    sourceSha256: sha256,
    catalogue: config.catalogue === undefined ? undefined : at(config.catalogue),
    auth: { keys_file: at(config.auth.keys_file) },
    receipts: { ...config.receipts, key_file: config.receipts.key_file === undefined ? undefined : at(config.receipts.key_file) },
    engine: { ...config.engine, model: config.engine.model === undefined ? undefined : at(config.engine.model) },
    tls: {
      ...config.tls,
      cert_file: config.tls.cert_file === undefined ? undefined : at(config.tls.cert_file),
      key_file: config.tls.key_file === undefined ? undefined : at(config.tls.key_file),
      acme:
        config.tls.acme === undefined
          ? undefined
          : { ...config.tls.acme, ca_file: config.tls.acme.ca_file === undefined ? undefined : at(config.tls.acme.ca_file) },
    },
    trust_page: config.trust_page?.dir === undefined ? config.trust_page : { dir: at(config.trust_page.dir) },
    transparency_log:
      config.transparency_log === undefined
        ? undefined
        : {
            ...config.transparency_log,
            dir: at(config.transparency_log.dir),
            key_file: config.transparency_log.key_file === undefined ? undefined : at(config.transparency_log.key_file),
            // Beside the folder, not in it: a copy of the folder restored over it does not reach the state.
            state: at(config.transparency_log.state ?? `${config.transparency_log.dir.replace(/\/+$/u, '')}.state`),
          },
  };
}

/** Reads and validates the configuration, once: the bytes parsed are the bytes measured. Relative paths inside it are relative to the file. */
export function loadConfig(path: string): LoadedConfig {
  const source = resolve(path);
  let bytes: Buffer;
  try {
    bytes = readFileSync(source);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      throw new ConfigError(
        `no config file at ${source}. Name one with --config FILE or SIGIL_CONFIG=FILE (default ${DEFAULT_CONFIG_PATH}); ` +
          'config/sigil.example.yaml is a commented example to copy, and docs/configuration.md lists every setting.',
      );
    }
    throw new ConfigError(`cannot read config ${source}: ${code ?? (err as Error).message}`);
  }
  return parseConfig(bytes.toString('utf8'), source, createHash('sha256').update(bytes).digest('hex'));
}
