import { parseArgs, type ParseArgsConfig } from 'node:util';
import { UsageError } from './cli-errors.ts';

type Parsed<T extends ParseArgsConfig> = ReturnType<typeof parseArgs<T>>;

/** `parseArgs` with the caller's config, a command line it refuses thrown as UsageError (its message says what was wrong). */
export function parseCommandLine<T extends ParseArgsConfig>(config: T): Parsed<T> {
  try {
    return parseArgs(config);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/**
 * For a command that prints its own usage and returns its exit code: the parsed command line, or the code once the
 * usage is printed: 0 for --help (to stdout), 2 for a line `parseArgs` refuses (to stderr, after what was wrong).
 */
export function parseOrUsage<T extends ParseArgsConfig>(command: string, usage: string, config: T): Parsed<T> | number {
  let parsed: Parsed<T>;
  try {
    parsed = parseArgs(config);
  } catch (err) {
    process.stderr.write(`sigil ${command}: ${(err as Error).message}\n${usage}`);
    return 2;
  }
  if ((parsed.values as { help?: unknown }).help === true) {
    process.stdout.write(usage);
    return 0;
  }
  return parsed;
}
