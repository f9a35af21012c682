import { DEFAULT_CONFIG_PATH, loadConfig, type LoadedConfig } from '../config/load.ts';
import type { OptionSpec } from './command-line.ts';

/** `--config FILE` as every command that reads the configuration declares it. */
export const CONFIG_OPTION = {
  type: 'string',
  value: 'FILE',
  description: 'the configuration',
  env: 'SIGIL_CONFIG',
  default: DEFAULT_CONFIG_PATH,
} as const satisfies OptionSpec;

/** docs/configuration.md#the-cli: `--config FILE`, else `SIGIL_CONFIG`, else config/sigil.yaml. */
export function configPath(flag: string | undefined): string {
  return flag ?? process.env.SIGIL_CONFIG ?? DEFAULT_CONFIG_PATH;
}

export function readConfigOrExit(flag: string | undefined): LoadedConfig | undefined {
  try {
    return loadConfig(configPath(flag));
  } catch (err) {
    process.stderr.write(`sigil: ${(err as Error).message}\n`);
    return undefined;
  }
}
