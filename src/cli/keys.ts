import { parseCommandLine, refuseUsage, type CommandSpec } from './command-line.ts';
import { addKey, keyId, readKeysFile, revokeKey } from '../auth/keys-file.ts';
import { CONFIG_OPTION, readConfigOrExit } from './config-arg.ts';
import { revokeAcrossFleet } from '../fleet/join.ts';
import { createLogger } from '../logger/logger.ts';

export const command = {
  name: 'keys',
  summary: 'Manages the API keys in the file auth.keys_file names.',
  operands: [
    ['<action>', 'add: makes a new API key, prints it once and stores only its SHA-256; list: lists the keys (id, when made, label); revoke: removes the key ID'],
    ['[ID]', 'the key to revoke: the id add or list shows (a unique prefix will do), or the key itself'],
  ],
  options: {
    config: CONFIG_OPTION,
    label: { type: 'string', value: 'NAME', description: 'add: a label listed with the key' },
  },
} as const satisfies CommandSpec;

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommandLine(command, argv);
  if (typeof parsed === 'number') return parsed;
  const [action, target] = parsed.positionals;
  if (action !== 'add' && action !== 'list' && !(action === 'revoke' && target !== undefined))
    return refuseUsage(command, action === 'revoke' ? 'revoke needs the ID of a key' : `the action is add, list or revoke, not '${action}'`);
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
    if (action === 'revoke' && target !== undefined) {
      const revoked = revokeKey(file, target);
      process.stderr.write(`Revoked key ${keyId(revoked.hash)}.\n`);
      if (config.fleet !== undefined) {
        await revokeAcrossFleet(config.fleet, revoked.hash, createLogger('silent'));
        process.stderr.write('Recorded in the fleet: every replica refuses it within seconds.\n');
      }
      return 0;
    }
  } catch (err) {
    process.stderr.write(`sigil keys: ${(err as Error).message}\n`);
    return 1;
  }
  return refuseUsage(command, 'the action is add, list or revoke');
}
