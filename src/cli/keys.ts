import { parseArgs } from 'node:util';
import { addKey, keyId, readKeysFile, revokeKey } from '../auth/keys-file.ts';
import { readConfigOrExit } from './config-arg.ts';
import { revokeAcrossFleet } from '../fleet/join.ts';
import { createLogger } from '../log/logger.ts';

const USAGE = `usage: sigil keys add [--label NAME] [--config FILE]
       sigil keys list [--config FILE]
       sigil keys revoke ID [--config FILE]   (ID: the key id shown by add/list, or the key itself)
`;

export async function run(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, options: { config: { type: 'string' }, label: { type: 'string' } } });
  } catch (err) {
    process.stderr.write(`sigil keys: ${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  const [action, target] = parsed.positionals;
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
      for (const k of readKeysFile(file)) process.stdout.write(`${keyId(k.hash)}  ${k.created}  ${k.label}\n`);
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
