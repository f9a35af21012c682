import { parseOrUsage } from './command-line.ts';
import { readKeysFile } from '../auth/keys-file.ts';
import { loadCatalogue } from '../catalogue/catalogue.ts';
import { loadConfig, type LoadedConfig } from '../config/load.ts';
import { teeStartProblems, type HardwareTee } from '../policy/tee-requirements.ts';
import { configPath } from './config-arg.ts';

const USAGE = `usage: sigil config check [--config FILE] [--tee tdx|sev-snp]

Reads the config (FILE, else $SIGIL_CONFIG, else config/sigil.yaml), the model catalogue and the keys
file it names, and the environment variables it needs, as \`sigil serve\` would, without serving.
With --tee, also checks what \`sigil serve\` refuses on a machine with that TEE (the attestation
provider, plaintext TLS, engines outside the VM), on any machine.
Prints a summary and exits 0, or names every problem and exits 1.
`;
const TEES: Record<string, HardwareTee> = { tdx: 'tdx', 'sev-snp': 'sev-snp', snp: 'sev-snp' };

/** What `sigil serve` would read before it starts anything; every problem found, or a summary. */
function summarise(config: LoadedConfig, tee: HardwareTee | undefined): string[] {
  const problems: string[] = tee === undefined ? [] : teeStartProblems(config, tee);
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
  if (problems.length > 0) throw new Error(problems.join('\n'));
  return lines;
}

/** `sigil config check`: the config and what it names, checked without serving (as LiteLLM's and llama-swap's users ask). */
export async function run(argv: string[]): Promise<number> {
  const parsed = parseOrUsage('config', USAGE, {
    args: argv,
    allowPositionals: true,
    options: { config: { type: 'string' }, tee: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  if (typeof parsed === 'number') return parsed;
  if (parsed.positionals.length !== 1 || parsed.positionals[0] !== 'check') {
    process.stderr.write(USAGE);
    return 2;
  }
  const teeName = parsed.values.tee;
  const tee = teeName === undefined ? undefined : TEES[teeName];
  if (teeName !== undefined && tee === undefined) {
    process.stderr.write(`sigil config check: --tee must be tdx or sev-snp, not ${JSON.stringify(teeName)}\n`);
    return 2;
  }
  const path = configPath(parsed.values.config);
  try {
    const config = loadConfig(path);
    const lines = summarise(config, tee);
    process.stdout.write(`config OK: ${config.source}\n${lines.map((l) => `  ${l}\n`).join('')}`);
    return 0;
  } catch (err) {
    process.stderr.write(`sigil config check: ${(err as Error).message}\n`);
    return 1;
  }
}
