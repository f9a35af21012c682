import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { addKey } from '../auth/keys-file.ts';
import type { LoadedConfig } from '../config/load.ts';
import { startSigil } from '../http/start.ts';
import { readConfigOrExit } from './config-arg.ts';

/**
 * Development convenience: with no hardware TEE and no keys file yet, make the first key and show it
 * once on the terminal (not in the log), so a fresh checkout works end to end.
 */
function ensureDevelopmentKey(config: LoadedConfig): void {
  if (config.attestation.provider !== 'none' || existsSync(config.auth.keys_file)) return;
  const { key, id } = addKey(config.auth.keys_file, 'first-start');
  process.stderr.write(
    `\nNo API keys yet, so Sigil made one (id ${id}, hash stored in ${config.auth.keys_file}).\n` +
      `It is shown this once; use it as 'Authorization: Bearer <key>':\n\n    ${key}\n\n`,
  );
}

export async function run(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: { config: { type: 'string' } } }));
  } catch (err) {
    process.stderr.write(`sigil serve: ${(err as Error).message}\nusage: sigil serve [--config FILE]\n`);
    return 2;
  }
  const config = readConfigOrExit(values.config);
  if (config === undefined) return 1;
  ensureDevelopmentKey(config);

  let sigil;
  try {
    sigil = await startSigil(config);
  } catch (err) {
    process.stderr.write(`sigil: ${(err as Error).message}\n`);
    return 1;
  }
  const reload = () => void sigil.reload();
  process.on('SIGHUP', reload);
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      process.off('SIGHUP', reload);
      void sigil.close(config.limits.shutdown_grace_ms, config.limits.shutdown_drain_ms).then(resolve);
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  return 0;
}
