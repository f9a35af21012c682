import { chooseSubcommand, parseCommandLine, type CommandLine, type CommandSpec } from './command-line.ts';
import { addKey, keyId, readKeysFile, revokeKey } from '../auth/keys-file.ts';
import { CONFIG_OPTION, readConfigOrExit } from './config-arg.ts';
import { revokeAcrossFleet } from '../fleet/join.ts';
import { createLogger } from '../logger/logger.ts';

const addCommand = {
  name: 'keys add',
  summary: 'Makes a new API key, prints it once and stores only its SHA-256 in auth.keys_file.',
  options: { config: CONFIG_OPTION, label: { type: 'string', value: 'NAME', description: 'a label listed with the key' } },
} as const satisfies CommandSpec;

const listCommand = {
  name: 'keys list',
  summary: 'Lists the keys: id (the first 12 hex digits of the hash), when made, label.',
  options: { config: CONFIG_OPTION },
} as const satisfies CommandSpec;

const revokeCommand = {
  name: 'keys revoke',
  summary: 'Removes a key (in a fleet, every replica refuses it within seconds).',
  operands: [['<ID>', 'the id add or list shows (a unique prefix will do), or the key itself']],
  options: { config: CONFIG_OPTION },
} as const satisfies CommandSpec;

export const command = {
  name: 'keys',
  summary: 'Manages the API keys, whose hashes live in the file auth.keys_file names.',
  options: {},
  subcommands: [addCommand, listCommand, revokeCommand],
} as const satisfies CommandSpec;

export async function run(argv: string[]): Promise<number> {
  const chosen = chooseSubcommand(command, argv);
  if (typeof chosen === 'number') return chosen;
  // add's options are list's and revoke's and --label.
  const parsed = parseCommandLine(chosen.sub, chosen.argv) as CommandLine<typeof addCommand.options> | number;
  if (typeof parsed === 'number') return parsed;
  const action = chosen.sub === addCommand ? 'add' : chosen.sub === listCommand ? 'list' : 'revoke';
  const config = readConfigOrExit(parsed.values.config);
  if (config === undefined) return 1;
  const file = config.auth.keys_file;
  try {
    if (action === 'add') {
      const { key, id } = addKey(file, parsed.values.label ?? '');
      process.stderr.write(`Added key ${id} to ${file}. This is the only time the key is shown; store it now:\n`);
      process.stdout.write(`${key}\n`);
      return 0;
    }
    if (action === 'list') {
      const keys = readKeysFile(file);
      if (keys.length === 0) {
        process.stderr.write(`No keys in ${file}; add one with \`sigil keys add\`.\n`);
        return 0;
      }
      process.stdout.write(`${'ID'.padEnd(12)}  ${'CREATED'.padEnd(24)}  LABEL\n`);
      for (const k of keys) process.stdout.write(`${keyId(k.hash)}  ${k.created.padEnd(24)}  ${k.label}\n`);
      return 0;
    }
    const revoked = revokeKey(file, parsed.positionals[0]!);
    process.stderr.write(`Revoked key ${keyId(revoked.hash)}.\n`);
    if (config.fleet !== undefined) {
      await revokeAcrossFleet(config.fleet, revoked.hash, createLogger('silent'));
      process.stderr.write('Recorded in the fleet: every replica refuses it within seconds.\n');
    }
    return 0;
  } catch (err) {
    process.stderr.write(`sigil keys: ${(err as Error).message}\n`);
    return 1;
  }
}
