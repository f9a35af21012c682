import { parseOrUsage } from './command-line.ts';
import { addKey, keyId, readKeysFile, revokeKey } from '../auth/keys-file.ts';
import { readConfigOrExit } from './config-arg.ts';
import { revokeAcrossFleet } from '../fleet/join.ts';
import { createLogger } from '../logger/logger.ts';

const USAGE = `usage: sigil keys add [--label NAME] [--config FILE]
       sigil keys list [--config FILE]
       sigil keys revoke ID [--config FILE]

add      makes a new API key, prints it once and stores only its SHA-256 in auth.keys_file
list     lists the keys: id (the first 12 hex digits of the hash), when made, label
revoke   removes a key; ID is the id shown by add or list (a unique prefix will do), or the key itself
`;

export async function run(argv: string[]): Promise<number> {
  const parsed = parseOrUsage('keys', USAGE, {
    args: argv,
    allowPositionals: true,
    options: { config: { type: 'string' }, label: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  if (typeof parsed === 'number') return parsed;
  const [action, target] = parsed.positionals;
  if (action !== 'add' && action !== 'list' && !(action === 'revoke' && target !== undefined)) {
    process.stderr.write(USAGE);
    return 2;
  }
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
  process.stderr.write(USAGE);
  return 2;
}
