import { chooseSubcommand, parseCommandLine, refuseUsage, type CommandSpec } from './command-line.ts';
import { readKeysFile } from '../auth/keys-file.ts';
import { loadCatalogue, type CatalogueModel } from '../catalogue/catalogue.ts';
import { createUpstream, requestModelList } from '../proxy/upstream.ts';
import { engineUnreachableCause } from '../proxy/engine-unreachable.ts';
import { loadConfig, type LoadedConfig } from '../config/load.ts';
import { teeStartProblems, type HardwareTee } from '../policy/tee-requirements.ts';
import { CONFIG_OPTION, configPath } from './config-arg.ts';

const checkCommand = {
  name: 'config check',
  summary:
    'Checks the config, the model catalogue and the keys file it names, and the environment variables it needs, as `sigil serve` would, without serving.',
  options: {
    config: CONFIG_OPTION,
    tee: {
      type: 'string',
      value: 'tdx|sev-snp',
      description:
        'also check what `sigil serve` refuses on a machine with that TEE (the attestation provider, plaintext TLS, engines outside the VM), on any machine',
    },
    probe: {
      type: 'boolean',
      description:
        'also ask each upstream for its model list (GET /v1/models, as sigil serve does at start) and name an engine that does not answer, with its URL and why, or a catalogue model it does not list',
    },
  },
  notes: 'Prints a summary and exits 0, or names every problem and exits 1.',
} as const satisfies CommandSpec;

/** `sigil config`: one subcommand, check. */
export const command = {
  name: 'config',
  summary: 'Checks a configuration without serving.',
  options: {},
  subcommands: [checkCommand],
} as const satisfies CommandSpec;

/** The model_hash examples and templates carry until the operator hashes the weights. */
const PLACEHOLDER_HASH = `sha256:${'0'.repeat(64)}`;
const TEES: Record<string, HardwareTee> = { tdx: 'tdx', 'sev-snp': 'sev-snp', snp: 'sev-snp' };

/** What `sigil serve` would read before it starts anything; every problem found, or a summary. */
function summarise(config: LoadedConfig, tee: HardwareTee | undefined): { lines: string[]; problems: string[]; models: readonly CatalogueModel[] } {
  const problems: string[] = tee === undefined ? [] : teeStartProblems(config, tee);
  let models: readonly CatalogueModel[] = [];
  const lines = [`listen: ${config.listen.host}:${config.listen.port}, tls ${config.tls.mode}, attestation ${config.attestation.provider}`];
  if (tee !== undefined) lines.push(`checked as on a ${tee} machine`);
  const upstreams = Object.entries(config.upstreams);
  if (upstreams.length === 0) lines.push('upstreams: none, so `sigil serve` starts the built-in engine with a demo model');
  for (const [name, upstream] of upstreams) {
    lines.push(`upstream ${name}: ${upstream.url}`);
    const env = upstream.api_key_env;
    if (env !== undefined && (process.env[env] ?? '') === '') problems.push(`upstreams.${name}.api_key_env: environment variable ${env} is not set`);
  }
  if (config.catalogue !== undefined) {
    try {
      const catalogue = loadCatalogue(
        config.catalogue,
        upstreams.map(([name]) => name),
      );
      lines.push(`catalogue: ${catalogue.models.length} model(s) in ${config.catalogue}: ${catalogue.models.map((m) => m.id).join(', ')}`);
      models = catalogue.models;
      for (const model of models.filter((m) => m.model_hash === PLACEHOLDER_HASH))
        lines.push(
          `warning: model ${model.id}: model_hash is the all-zero placeholder, so receipts would name no real weights: put what \`sigil hash-model PATH\` prints for them`,
        );
    } catch (err) {
      problems.push((err as Error).message);
    }
  } else if (upstreams.length > 0) {
    problems.push('catalogue: give the path of the model catalogue (upstreams are configured, so the built-in one does not apply)');
  }
  try {
    const keys = readKeysFile(config.auth.keys_file);
    lines.push(`keys: ${keys.length} in ${config.auth.keys_file}${keys.length === 0 ? ' (every request will be refused; add one with `sigil keys add`)' : ''}`);
  } catch (err) {
    problems.push((err as Error).message);
  }
  return { lines, problems, models };
}

/** `--probe`: each upstream's model list, asked as the start asks it; what answered, and every problem. */
async function probeUpstreams(config: LoadedConfig, models: readonly CatalogueModel[]): Promise<{ lines: string[]; problems: string[] }> {
  const lines: string[] = [];
  const problems: string[] = [];
  for (const [name, settings] of Object.entries(config.upstreams)) {
    let upstream;
    try {
      upstream = createUpstream(name, settings);
    } catch {
      continue; // an unset api_key_env, already named
    }
    try {
      const response = await requestModelList(upstream);
      if (response.statusCode >= 300) {
        await response.body.dump();
        problems.push(`upstreams.${name}: ${upstream.url}/models answered HTTP ${response.statusCode}`);
        continue;
      }
      const listed = new Set((((await response.body.json()) as { data?: Array<{ id?: unknown }> }).data ?? []).map((m) => String(m.id)));
      lines.push(`upstream ${name}: answers, listing ${listed.size} model(s)`);
      for (const model of models) {
        if (model.upstreams.includes(name) && !listed.has(model.upstream_model))
          problems.push(`upstreams.${name}: does not list ${model.upstream_model} (catalogue model ${model.id}); it lists ${[...listed].join(', ') || 'none'}`);
      }
    } catch (err) {
      problems.push(`upstreams.${name}: not reachable at ${upstream.url}: ${engineUnreachableCause(err)}`);
    } finally {
      await upstream.pool.close();
    }
  }
  return { lines, problems };
}

/** `sigil config check`: the config and what it names, checked without serving (as LiteLLM's and llama-swap's users ask). */
export async function run(argv: string[]): Promise<number> {
  const chosen = chooseSubcommand(command, argv);
  if (typeof chosen === 'number') return chosen;
  const parsed = parseCommandLine(checkCommand, chosen.argv);
  if (typeof parsed === 'number') return parsed;
  const teeName = parsed.values.tee;
  const tee = teeName === undefined ? undefined : TEES[teeName];
  if (teeName !== undefined && tee === undefined) {
    return refuseUsage(checkCommand, `--tee must be tdx or sev-snp, not ${JSON.stringify(teeName)}`);
  }
  const path = configPath(parsed.values.config);
  try {
    const config = loadConfig(path);
    const { lines, problems, models } = summarise(config, tee);
    if (parsed.values.probe === true) {
      const probed = await probeUpstreams(config, models);
      lines.push(...probed.lines);
      problems.push(...probed.problems);
    }
    if (problems.length > 0) {
      process.stderr.write(`sigil config check: ${problems.join('\n')}\n`);
      return 1;
    }
    process.stdout.write(`config OK: ${config.source}\n${lines.map((l) => `  ${l}\n`).join('')}`);
    return 0;
  } catch (err) {
    process.stderr.write(`sigil config check: ${(err as Error).message}\n`);
    return 1;
  }
}
